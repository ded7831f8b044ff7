// No SQL function over SQL_FUNCTION_LINES_MAX lines (issue 41): the decision is read as a few
// short functions, each with one job, not as one body of hundreds of lines. Measured on the
// source files (prisma/sql/), which hold every function's current definition.
import { describe, expect, it } from 'vitest';
import { functionLengths, readSqlSources, SQL_FUNCTION_LINES_MAX } from '../../harness/schema/sql-sources.ts';

describe('the SQL functions', () => {
  it(`are each at most ${SQL_FUNCTION_LINES_MAX} lines long`, () => {
    const lengths = functionLengths(readSqlSources());
    expect(lengths.length).toBeGreaterThan(30);
    expect(lengths.filter((l) => l.lines > SQL_FUNCTION_LINES_MAX)).toEqual([]);
  });

  it('are measured from CREATE through the closing $$; (negative control: a long one is caught)', () => {
    const body = Array.from({ length: SQL_FUNCTION_LINES_MAX - 2 }, (_, i) => `    -- line ${i}`).join('\n');
    const sql = (extra: string) =>
      `-- head\nCREATE OR REPLACE FUNCTION "f"() RETURNS VOID\nAS $$\n${body}${extra}\n$$;\n`;
    expect(functionLengths([{ file: 'f.sql', sql: sql('') }])).toEqual([
      { file: 'f.sql', fn: 'f', lines: SQL_FUNCTION_LINES_MAX + 1 },
    ]);
    expect(functionLengths([{ file: 'f.sql', sql: sql('\n    -- one more') }])[0]?.lines).toBe(
      SQL_FUNCTION_LINES_MAX + 2,
    );
    expect(() => functionLengths([{ file: 'g.sql', sql: 'CREATE FUNCTION "g"() AS $$\n' }])).toThrow(
      /g\(\) has no closing/,
    );
  });
});
