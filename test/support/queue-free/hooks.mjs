// Module customization hooks (node's module.register, registered by register.mjs) that refuse to
// load BullMQ or ioredis: an import that resolves into either package fails, naming it and its
// importer. Plain JavaScript, so that a scratch project running plain node (test/compiled/pack.test.ts)
// uses the same check as the sources under tsx (test/library/intake-entry.test.ts).
export const QUEUE_MODULE = /[\\/]node_modules[\\/](bullmq|ioredis)[\\/]/;

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  if (QUEUE_MODULE.test(resolved.url)) {
    throw new Error(`refused to load ${resolved.url} (imported as '${specifier}' by ${context.parentURL})`);
  }
  return resolved;
}
