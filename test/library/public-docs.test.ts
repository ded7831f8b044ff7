// TSDoc on every export of the public entries (src/index.ts, src/intake-entry.ts), read with the
// TypeScript compiler as an editor shows it: a summary for each, an @throws on each function
// that the entries export, and an @defaultValue on each optional option that has a default.
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

const ENTRIES = ['src/index.ts', 'src/intake-entry.ts'];
const program = ts.createProgram(
  ENTRIES.map((e) => join(PROJECT_ROOT, e)),
  {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    allowImportingTsExtensions: true,
    noEmit: true,
    strict: true,
  },
);
const checker = program.getTypeChecker();

/** Functions that answer a refusal (a result, a boolean) rather than throw: their summaries say so. */
const NEVER_THROW = new Set(['isFencedTransfersError', 'validateTransferRequest', 'validateOperationRequest']);

interface Documented {
  name: string;
  summary: string;
  tags: string[];
  isFunction: boolean;
}

function exportsOf(entry: string): Documented[] {
  const file = program.getSourceFile(join(PROJECT_ROOT, entry));
  if (file === undefined) throw new Error(`${entry} not in the program`);
  const module = checker.getSymbolAtLocation(file);
  if (module === undefined) throw new Error(`${entry} is not a module`);
  return checker.getExportsOfModule(module).map((exported) => {
    const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
    return {
      name: exported.name,
      summary: ts.displayPartsToString(symbol.getDocumentationComment(checker)).trim(),
      tags: symbol.getJsDocTags(checker).map((t) => t.name),
      isFunction: (symbol.flags & ts.SymbolFlags.Function) !== 0,
    };
  });
}

/** The optional properties of an exported interface that carry no @defaultValue tag. */
function optionalsWithoutDefault(name: string): string[] {
  const file = program.getSourceFile(join(PROJECT_ROOT, 'src/index.ts')) as ts.SourceFile;
  const module = checker.getSymbolAtLocation(file) as ts.Symbol;
  const exported = checker.getExportsOfModule(module).find((s) => s.name === name) as ts.Symbol;
  const type = checker.getDeclaredTypeOfSymbol(checker.getAliasedSymbol(exported));
  return type
    .getProperties()
    .filter((p) => (p.flags & ts.SymbolFlags.Optional) !== 0)
    .filter((p) => !p.getJsDocTags(checker).some((t) => t.name === 'defaultValue'))
    .map((p) => p.name);
}

describe.each(ENTRIES)('%s', (entry) => {
  const exported = exportsOf(entry);

  it('documents every export with a summary', () => {
    expect(exported.length).toBeGreaterThan(20);
    expect(exported.filter((e) => e.summary === '').map((e) => e.name)).toEqual([]);
  });

  it('names what each exported function throws (@throws), but for those that answer a refusal instead', () => {
    const missing = exported.filter((e) => e.isFunction && !e.tags.includes('throws') && !NEVER_THROW.has(e.name));
    expect(missing.map((e) => e.name)).toEqual([]);
  });

  it('gives each optional property of an exported options type its default (@defaultValue)', () => {
    const options = exported.filter((e) => e.name.endsWith('Options'));
    expect(options.map((e) => e.name)).toContain('FollowOptions');
    for (const option of options) expect(optionalsWithoutDefault(option.name), option.name).toEqual([]);
  });
});
