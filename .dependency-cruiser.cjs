// The import rules of the project, checked by `npm run lint:imports` (part of `npm test`).
// The product is src/, all of it, and it is what the production image carries; the harnesses
// (harness/) drive it from outside, so an import may go from a harness to the product and never
// the other way. Inside the product, the lock knows nothing of the ledger, and the errors module
// (src/errors.ts) sits below everything: it imports no other product module. The public entries
// (src/index.ts, src/intake-entry.ts) are for importers outside src/; the intake's entry never
// reaches BullMQ or ioredis, whatever it imports.
module.exports = {
  forbidden: [
    {
      name: 'lock-imports-ledger',
      comment: 'The lock knows nothing about the ledger: shared names live in src/errors.ts, below both.',
      severity: 'error',
      from: { path: '^src/lock/' },
      to: { path: '^src/ledger/' },
    },
    {
      name: 'errors-import-product',
      comment: 'src/errors.ts is the bottom layer: every product module may import it, and it imports none.',
      severity: 'error',
      from: { path: '^src/errors\\.ts$' },
      to: { path: '^src/', pathNot: '^src/errors\\.ts$' },
    },
    {
      name: 'intake-entry-reaches-queue',
      comment: "The intake's entry (fenced-transfers/intake) must not load BullMQ or ioredis, even transitively.",
      severity: 'error',
      from: { path: '^src/intake-entry\\.ts$' },
      to: { path: 'node_modules/(bullmq|ioredis)/', reachable: true },
    },
    {
      name: 'product-imports-entry',
      comment: 'The public entries re-export the product for importers outside it; the product never imports them.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(index|intake-entry)\\.ts$' },
      to: { path: '^src/(index|intake-entry)\\.ts$' },
    },
    {
      name: 'product-imports-harness',
      comment: 'Product code must not import a harness: the production build is src/ alone.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^harness/' },
    },
    {
      name: 'source-imports-test',
      comment: 'Nothing under src/ may import the tests or their support files.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^test/' },
    },
    {
      name: 'source-imports-example',
      comment: 'The product and the harnesses never import the worked examples under examples/.',
      severity: 'error',
      from: { path: '^(src|harness)/' },
      to: { path: '^examples/' },
    },
    {
      name: 'example-imports-private-module',
      comment: 'An example imports the product through its public entries only, as a service that installed it would.',
      severity: 'error',
      from: { path: '^examples/' },
      to: { path: '^src/', pathNot: '^src/(index|intake-entry)\\.ts$' },
    },
    {
      name: 'example-imports-harness-or-test',
      comment: 'An example uses the product as a service would: no harness, no test support.',
      severity: 'error',
      from: { path: '^examples/' },
      to: { path: '^(harness|test)/' },
    },
    {
      name: 'unresolvable-import',
      comment: 'An import that resolves to no file is a typo or a file that moved.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/generated/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.js', '.json'],
      exportsFields: ['exports'],
      conditionNames: ['import', 'node', 'default'],
    },
  },
};
