// `npm run trace-picture -- --spans FILE [--out FILE]`: draws the spans a traced run exported
// (a JSON file of otlp-receiver.ts's spansToJson(); test/tracing/transfer-trace.test.ts writes
// one when TRACE_SPANS_OUT names it) as an SVG waterfall, by default docs/images/transfer-trace.svg.
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { UsageError } from '../../src/errors.ts';
import { spansFromJson } from './otlp-receiver.ts';
import { renderTraceSvg } from './trace-picture.ts';

const USAGE = 'npm run trace-picture -- --spans FILE [--out FILE] [--title TEXT]';
export const TRACE_PICTURE_PATH = join('docs', 'images', 'transfer-trace.svg');

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    {
      spans: { type: 'string' },
      out: { type: 'string', default: TRACE_PICTURE_PATH },
      title: { type: 'string', default: 'One transfer: requested through the intake, retried once, applied' },
    },
    USAGE,
  );
  if (values.spans === undefined) throw new UsageError(`--spans is required\nusage: ${USAGE}`);
  const spans = spansFromJson(readFileSync(resolve(values.spans), 'utf8'));
  const out = resolve(PROJECT_ROOT, values.out);
  writeFileSync(out, renderTraceSvg(spans, values.title));
  process.stdout.write(`${JSON.stringify({ written: out, spans: spans.length })}\n`);
});
