// One pino logger per process: JSON lines on stderr, so stdout stays free for command output.
// Errors (`err`, `error`) go through a serializer that drops passwords, and every other field
// that looks like one is censored (see redact.ts): no log line carries a credential.
import { type Logger, pino } from 'pino';
import { errorSerializer, REDACTED } from './redact.ts';

export type { Logger };

/** Field paths censored wherever they appear at these depths. */
const REDACT_PATHS = [
  'password',
  '*.password',
  '*.*.password',
  'connectionString',
  '*.connectionString',
  'databaseUrl',
  '*.databaseUrl',
  'redisUrl',
  '*.redisUrl',
];

export function createLogger(level: string, name: string): Logger {
  return pino(
    {
      level,
      name,
      base: { pid: process.pid },
      serializers: { err: errorSerializer, error: errorSerializer },
      redact: { paths: REDACT_PATHS, censor: REDACTED },
    },
    pino.destination(2),
  );
}
