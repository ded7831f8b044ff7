// The generated reference documents match the code that declares their tables: a setting, a
// metric or an outcome added, removed or reworded in the code without `npm run docs` fails here.
import { describe, expect, it } from 'vitest';
import { GENERATED_NOTICE, REFERENCE_DOCS, staleReferenceDocs } from '../../../src/harness/docs/reference-docs.ts';

describe('generated reference documents', () => {
  it('are committed exactly as the code renders them', () => {
    expect(staleReferenceDocs()).toEqual([]);
  });

  it('each say that they are generated', () => {
    for (const doc of REFERENCE_DOCS) expect(doc.render().split('\n')[0], doc.path).toBe(GENERATED_NOTICE);
  });

  it('are caught when one drifts', () => {
    const drifted = { path: 'README.md', render: () => 'not the README\n' };
    expect(staleReferenceDocs([drifted])).toEqual(['README.md']);
  });
});
