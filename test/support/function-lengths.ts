// The length ratchet's arithmetic, pure: how long each function of a source text is, under a name
// that survives edits above it, and how the measured lengths compare with the list of today's
// exceptions (test/layout/long-functions.json). Reading the tree and the list is
// test/support/long-functions.ts; the test is test/layout/long-functions.test.ts.
import ts from 'typescript';

/** TigerStyle's limit: a function longer than this is split, or waits on the list of exceptions. */
export const FUNCTION_LINES_MAX = 70;

export interface FunctionLength {
  /** `path#Outer.inner`: the enclosing named declarations, never a line number. */
  identity: string;
  /** From the function's first line to its last, inclusive (its leading comment left out). */
  lines: number;
}

/** Identity → the length it may keep; every entry is over FUNCTION_LINES_MAX. */
export type LengthList = Readonly<Record<string, number>>;

export type Offence =
  | { kind: 'unlisted'; identity: string; lines: number }
  | { kind: 'grew'; identity: string; lines: number; allowed: number }
  | { kind: 'shrank'; identity: string; lines: number; allowed: number }
  | { kind: 'gone'; identity: string; allowed: number };

type FunctionNode =
  | ts.FunctionDeclaration
  | ts.FunctionExpression
  | ts.ArrowFunction
  | ts.MethodDeclaration
  | ts.ConstructorDeclaration
  | ts.AccessorDeclaration;

const ANONYMOUS = '<anonymous>';

function isFunctionWithBody(node: ts.Node): node is FunctionNode {
  const functionLike =
    ts.isFunctionDeclaration(node) ||
    ts.isFunctionExpression(node) ||
    ts.isArrowFunction(node) ||
    ts.isMethodDeclaration(node) ||
    ts.isConstructorDeclaration(node) ||
    ts.isAccessor(node);
  return functionLike && node.body !== undefined;
}

function propertyName(name: ts.PropertyName | ts.BindingName, sf: ts.SourceFile): string | null {
  if (ts.isIdentifier(name) || ts.isPrivateIdentifier(name)) return name.text;
  if (ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  if (ts.isComputedPropertyName(name)) return `[${name.expression.getText(sf)}]`;
  return null; // a destructuring pattern names nothing
}

/** Parentheses, `as`, `satisfies` and `!`: wrappers that leave a value what it is. */
function isWrapper(
  node: ts.Node,
): node is ts.ParenthesizedExpression | ts.AssertionExpression | ts.SatisfiesExpression | ts.NonNullExpression {
  return (
    ts.isParenthesizedExpression(node) ||
    ts.isAsExpression(node) ||
    ts.isTypeAssertionExpression(node) ||
    ts.isSatisfiesExpression(node) ||
    ts.isNonNullExpression(node)
  );
}

/** The expression a value sits in, seen through its wrappers. */
function holderOf(node: ts.Node): ts.Node {
  let holder = node.parent;
  while (isWrapper(holder)) holder = holder.parent;
  return holder;
}

function unwrapped(node: ts.Expression): ts.Expression {
  let value = node;
  while (isWrapper(value)) value = value.expression;
  return value;
}

/** The name a value (a function or class expression) takes from where it is put, if any. */
function nameFromHolder(node: ts.Node, sf: ts.SourceFile): string | null {
  const holder = holderOf(node);
  if (ts.isVariableDeclaration(holder) || ts.isPropertyAssignment(holder) || ts.isPropertyDeclaration(holder)) {
    return propertyName(holder.name, sf);
  }
  if (ts.isBinaryExpression(holder) && holder.operatorToken.kind === ts.SyntaxKind.EqualsToken) {
    const target = holder.left;
    if (ts.isIdentifier(target)) return target.text;
    if (ts.isPropertyAccessExpression(target)) return target.name.text;
  }
  if (ts.isExportAssignment(holder)) return 'default';
  return null;
}

function functionName(node: FunctionNode, sf: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  if (ts.isMethodDeclaration(node) || ts.isAccessor(node)) {
    const name = propertyName(node.name, sf) ?? ANONYMOUS;
    if (ts.isGetAccessor(node)) return `get ${name}`;
    return ts.isSetAccessor(node) ? `set ${name}` : name;
  }
  if (ts.isFunctionDeclaration(node)) {
    const exportedDefault = node.modifiers?.some((m) => m.kind === ts.SyntaxKind.DefaultKeyword) ?? false;
    return node.name?.text ?? (exportedDefault ? 'default' : ANONYMOUS);
  }
  const ownName = ts.isFunctionExpression(node) ? node.name?.text : undefined;
  return nameFromHolder(node, sf) ?? ownName ?? ANONYMOUS;
}

/** The name a node adds to the identities of the functions inside it, or null if it adds none. */
function scopeName(node: ts.Node, sf: ts.SourceFile): string | null {
  if (ts.isClassDeclaration(node) || ts.isClassExpression(node)) {
    return node.name?.text ?? nameFromHolder(node, sf) ?? '<class>';
  }
  // A named holder of something other than a function or class: `const routes = { list() {} }`
  // names `routes.list`, `const done = new Promise((resolve) => ...)` names `done.<anonymous>`.
  if (ts.isVariableDeclaration(node) || ts.isPropertyAssignment(node) || ts.isPropertyDeclaration(node)) {
    const value = node.initializer === undefined ? undefined : unwrapped(node.initializer);
    if (value === undefined || isFunctionWithBody(value) || ts.isClassExpression(value)) return null;
    return propertyName(node.name, sf);
  }
  return null;
}

/**
 * Every function of one source file (declarations, expressions, arrows, methods, constructors,
 * accessors; overload signatures have no body and are not functions). A nested function counts on
 * its own, and its lines count in the function around it too. Two functions that would share an
 * identity are told apart by a counter in source order: `run`, `run[2]`.
 */
export function measureSource(path: string, text: string): FunctionLength[] {
  const sf = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: FunctionLength[] = [];
  const seen = new Map<string, number>();
  const unique = (qualified: string): string => {
    const count = (seen.get(qualified) ?? 0) + 1;
    seen.set(qualified, count);
    return count === 1 ? qualified : `${qualified}[${count}]`;
  };
  const lineOf = (position: number): number => sf.getLineAndCharacterOfPosition(position).line;

  const visit = (node: ts.Node, scope: string): void => {
    let inner = scope;
    if (isFunctionWithBody(node)) {
      inner = unique(scope === '' ? functionName(node, sf) : `${scope}.${functionName(node, sf)}`);
      found.push({ identity: `${path}#${inner}`, lines: lineOf(node.getEnd()) - lineOf(node.getStart(sf)) + 1 });
    } else {
      const name = scopeName(node, sf);
      if (name !== null) inner = scope === '' ? name : `${scope}.${name}`;
    }
    ts.forEachChild(node, (child) => visit(child, inner));
  };
  visit(sf, '');
  return found;
}

/** What breaks the ratchet, in identity order: see Offence's kinds and describeOffences. */
export function judgeLengths(
  measured: readonly FunctionLength[],
  list: LengthList,
  max = FUNCTION_LINES_MAX,
): Offence[] {
  const offences: Offence[] = [];
  const lengths = new Map(measured.map((f) => [f.identity, f.lines]));
  for (const [identity, lines] of lengths) {
    const allowed = list[identity];
    if (lines <= max) continue;
    if (allowed === undefined) offences.push({ kind: 'unlisted', identity, lines });
    else if (lines > allowed) offences.push({ kind: 'grew', identity, lines, allowed });
  }
  for (const [identity, allowed] of Object.entries(list)) {
    const lines = lengths.get(identity);
    if (lines === undefined) offences.push({ kind: 'gone', identity, allowed });
    else if (lines <= max || lines < allowed) offences.push({ kind: 'shrank', identity, lines, allowed });
  }
  return offences.sort((a, b) => (a.identity < b.identity ? -1 : a.identity > b.identity ? 1 : 0));
}

/**
 * The list with every entry the code has outgrown taken away: a function gone or now within the
 * limit leaves the list, a shorter one's entry is lowered to its length. It never adds an entry
 * and never raises one, whatever was measured: a new long function, or a listed one that grew,
 * stays an offence until the code is split.
 */
export function tightenList(
  measured: readonly FunctionLength[],
  list: LengthList,
  max = FUNCTION_LINES_MAX,
): Record<string, number> {
  const lengths = new Map(measured.map((f) => [f.identity, f.lines]));
  const kept: Record<string, number> = {};
  for (const identity of Object.keys(list).sort()) {
    const allowed = list[identity] as number;
    const lines = lengths.get(identity);
    if (lines === undefined || lines <= max) continue;
    kept[identity] = Math.min(allowed, lines);
  }
  return kept;
}

function describeOffence(offence: Offence, max: number): string {
  switch (offence.kind) {
    case 'unlisted':
      return `${offence.identity}: ${offence.lines} lines, allowed ${max}: split it (the list takes no new entry)`;
    case 'grew':
      return `${offence.identity}: ${offence.lines} lines, allowed ${offence.allowed}: it grew, split it`;
    case 'shrank':
      return offence.lines <= max
        ? `${offence.identity}: ${offence.lines} lines, allowed ${offence.allowed}: now within ${max}, remove it from the list`
        : `${offence.identity}: ${offence.lines} lines, allowed ${offence.allowed}: shorter, lower it in the list to ${offence.lines}`;
    case 'gone':
      return `${offence.identity}: no such function, allowed ${offence.allowed}: remove it from the list`;
  }
}

/** One line per offence, then how to bring the list down to the code (which never lifts it). */
export function describeOffences(offences: readonly Offence[], listPath: string, max = FUNCTION_LINES_MAX): string {
  const lines = offences.map((offence) => `  ${describeOffence(offence, max)}`);
  const stale = offences.some((offence) => offence.kind === 'shrank' || offence.kind === 'gone');
  return [
    `${offences.length} function(s) break the ${max}-line ratchet (${listPath}):`,
    ...lines,
    ...(stale
      ? [
          `To remove or lower the stale entries: npx tsx test/support/long-functions-cli.ts --write (it never adds or raises one)`,
        ]
      : []),
  ].join('\n');
}
