// Command-line flag parsing shared by the commands: unknown flags are errors, not ignored.
import { type ParseArgsConfig, parseArgs } from 'node:util';

export class UsageError extends Error {
  override name = 'UsageError';
}

export function parseFlags<T extends NonNullable<ParseArgsConfig['options']>>(
  argv: string[],
  options: T,
  usage: string,
  positionalsMax = 0,
) {
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

export function integerFlag(value: string, flag: string): number {
  if (!/^\d+$/.test(value)) throw new UsageError(`${flag} must be a whole number, got ${JSON.stringify(value)}`);
  return Number(value);
}

export function amountFlag(value: string, flag: string): bigint {
  if (!/^\d{1,19}$/.test(value))
    throw new UsageError(`${flag} must be an integer amount in minor units, got ${JSON.stringify(value)}`);
  return BigInt(value);
}
