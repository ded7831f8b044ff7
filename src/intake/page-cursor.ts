// The cursor of a page read in the order (time, key): a statement's (time, entry id) and the
// query API's (time, operation id). It carries the time as the database wrote it, to the
// microsecond in UTC (a JS Date keeps milliseconds, so a cursor built from one would land inside a
// run of rows written within one millisecond and skip or repeat some), `|`, and the key, in
// base64url: opaque to the caller.

/** `column`'s time as a cursor carries it, whatever the session's TimeZone: UTC, six fractional digits. */
export const atTextSql = (column: string): string =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

/** The time as atTextSql() writes it: `2026-12-05T10:00:00.123456Z`. */
const AT_TEXT = String.raw`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z`;
const AT_TEXT_LENGTH = 27;

/** What a page's key may be: a pattern (no anchors) and its longest text. */
export interface CursorKey {
  readonly pattern: string;
  readonly lengthMax: number;
}

/** The cursor of the page after the row at `atText` with `key`. */
export function encodePageCursor(atText: string, key: string): string {
  return Buffer.from(`${atText}|${key}`, 'utf8').toString('base64url');
}

/**
 * The time and the key a cursor carries, or a RangeError, before any query, saying it is not one
 * `handedOutBy` handed out.
 */
export function decodePageCursor(cursor: string, key: CursorKey, handedOutBy: string): { atText: string; key: string } {
  const refused = () => new RangeError(`cursor is not one ${handedOutBy} handed out: ${JSON.stringify(cursor)}`);
  // Longest worth decoding: base64url of the longest text the pattern allows.
  const lengthMax = Math.ceil(((AT_TEXT_LENGTH + 1 + key.lengthMax) * 4) / 3);
  if (typeof cursor !== 'string' || cursor.length < 1 || cursor.length > lengthMax) throw refused();
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw refused();
  const pattern = new RegExp(`^(${AT_TEXT})\\|(${key.pattern})$`);
  const [, atText, text] = pattern.exec(Buffer.from(cursor, 'base64url').toString('utf8')) ?? [];
  if (atText === undefined || text === undefined || Number.isNaN(Date.parse(atText))) throw refused();
  return { atText, key: text };
}
