// Command-line flag parsing shared by the commands: unknown flags are errors, not ignored.
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { parseWholeNumber, type WholeNumberError } from '../config/bounds.ts';
import { UsageError } from '../errors.ts';

/** What parseArgs answers for these options, strict, positionals allowed (named, so declarations can say it). */
export type ParsedFlags<T extends NonNullable<ParseArgsConfig['options']>> = ReturnType<
  typeof parseArgs<{ args: string[]; options: T; strict: true; allowPositionals: true }>
>;

export function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  usage: string,
  positionalsMax = 0,
): ParsedFlags<T> {
  const parsed = (() => {
    try {
      return parseArgs({ args: argv, options, strict: true, allowPositionals: true });
    } catch (err) {
      throw new UsageError(`${err instanceof Error ? err.message : String(err)}\nusage: ${usage}`);
    }
  })();
  if (parsed.positionals.length > positionalsMax) {
    throw new UsageError(`unexpected argument ${JSON.stringify(parsed.positionals[positionalsMax])}\nusage: ${usage}`);
  }
  return parsed;
}

export function requireFlag(value: string | undefined, flag: string, usage: string): string {
  if (value === undefined || value === '') throw new UsageError(`missing ${flag}\nusage: ${usage}`);
  return value;
}

/** How a flag's whole number is refused; the range is left out when the caller set none. */
const flagFault: WholeNumberError = ({ name, min, max, given, problem }) =>
  problem === 'not-whole'
    ? new UsageError(
        `${name} must be a whole number${max === Number.MAX_SAFE_INTEGER ? '' : ` from ${min} to ${max}`}, got ${JSON.stringify(given)}`,
      )
    : new UsageError(`${name} must be from ${min} to ${max}, got ${given}`);

/** A flag's value as a whole number from `min` to `max` (by default any that is exact in a double). */
export function integerFlag(value: string, flag: string, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  return parseWholeNumber(value, flag, min, max, flagFault);
}

export function amountFlag(value: string, flag: string): bigint {
  if (!/^\d{1,19}$/.test(value))
    throw new UsageError(`${flag} must be an integer amount in minor units, got ${JSON.stringify(value)}`);
  return BigInt(value);
}

/**
 * An ISO 8601 instant with its zone (`2026-12-19T10:00:00Z`, `…T11:00:00.250+01:00`) or a date
 * alone (midnight UTC). A time without a zone would be read in the machine's, and more than
 * milliseconds would be cut off silently: both are refused.
 */
const INSTANT_PATTERN = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/;

/** A flag's value as an instant (see INSTANT_PATTERN). */
export function instantFlag(value: string, flag: string): Date {
  const instant = new Date(value);
  if (!INSTANT_PATTERN.test(value) || Number.isNaN(instant.getTime()))
    throw new UsageError(
      `${flag} must be an ISO 8601 instant with its zone (2026-12-19T10:00:00Z) or a date, got ${JSON.stringify(value)}`,
    );
  return instant;
}

/** `--metadata KEY=VALUE`, repeated, as an object (undefined when the flag is absent); the bounds are the caller's. */
export function metadataFlags(pairs: string[] | undefined): Record<string, string> | undefined {
  if (pairs === undefined) return undefined;
  const metadata: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new UsageError(`--metadata must be KEY=VALUE, got ${JSON.stringify(pair)}`);
    metadata[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return metadata;
}
