// The module hooks of record-loads.mjs: resolve() notes each SDK module (not @opentelemetry/api,
// not bullmq-otel) in the file it was given, then resolves as before.
import { appendFileSync } from 'node:fs';

let file = '';
const SDK = /@opentelemetry\/(?!api\/)[^/]+\//;

export function initialize(data) {
  file = data?.file ?? '';
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  if (file !== '' && SDK.test(resolved.url)) appendFileSync(file, `${resolved.url}\n`);
  return resolved;
}
