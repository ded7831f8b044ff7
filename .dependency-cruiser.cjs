// The import rules of the project, checked by `npm run lint:imports` (part of `npm test`).
// The product is src/, all of it, and it is what the production image carries; the harnesses
// (harness/) drive it from outside, so an import may go from a harness to the product and never
// the other way. Inside the product, the lock knows nothing of the ledger, and the errors module
// (src/errors.ts) sits below everything: it imports no other product module.
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
