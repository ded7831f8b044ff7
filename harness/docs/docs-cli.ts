// `npm run docs`: rewrites the generated reference documents from the code (see
// reference-docs.ts). `npm run docs -- --check` writes nothing and exits 1 naming every
// document that differs from the code. The documents read from the catalogs (roles.md) need the
// PostgreSQL server of DATABASE_URL, where a scratch database is made and dropped.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { REFERENCE_DOCS, staleDatabaseDocs, staleReferenceDocs } from './reference-docs.ts';

const USAGE = 'npm run docs [-- --check]';

await runCli(async () => {
  const { values } = parseFlags(process.argv.slice(2), { check: { type: 'boolean', default: false } }, USAGE);
  const fromDatabase = await staleDatabaseDocs();
  const stale = [...staleReferenceDocs(), ...fromDatabase.filter((d) => d.stale).map((d) => d.path)];
  if (values.check) {
    for (const path of stale) process.stderr.write(`${path} differs from the code: run npm run docs\n`);
    if (stale.length > 0) process.exitCode = 1;
    return;
  }
  for (const doc of REFERENCE_DOCS) {
    const path = join(PROJECT_ROOT, doc.path);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, doc.render());
  }
  for (const doc of fromDatabase) writeFileSync(join(PROJECT_ROOT, doc.path), doc.text);
  const written = [...REFERENCE_DOCS, ...fromDatabase].map((d) => d.path);
  process.stdout.write(`${JSON.stringify({ written, changed: stale })}\n`);
});
