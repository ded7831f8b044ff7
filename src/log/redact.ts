// What a log line or an error message may not carry: passwords. Connection URLs keep their
// user and host but lose the password; properties named like a secret lose their value; and
// ioredis errors lose the arguments of the command that failed when it is an AUTH or HELLO
// (a refused password comes back as a ReplyError whose `command.args` holds that password).
import { pino } from 'pino';

export const REDACTED = '[redacted]';
/** Property names whose values are never logged. */
const SECRET_KEY = /password|passwd|secret|connectionstring|credential|^pass$/i;

/** Whether a property or variable named `name` holds a secret, whose value is never shown. */
export function isSecretName(name: string): boolean {
  return SECRET_KEY.test(name);
}
/** Redis commands whose arguments carry credentials. */
const SECRET_COMMANDS = new Set(['auth', 'hello', 'migrate']);
/** scheme://user:password@ and ?password=... in any text. */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/]*:)([^\s@/]*)@/gi;
/** What redactUrl (src/config/config.ts) already put in place of a password: left as it is. */
const ALREADY_MASKED = '***';
const QUERY_PASSWORD = /([?&](?:ssl)?password=)[^&\s]*/gi;
/** Deeper structures are cut: errors nest causes, never this deep. */
const DEPTH_MAX = 8;

/** The text with every URL password (user part or query parameter) replaced. */
export function redactText(text: string): string {
  return text
    .replace(URL_PASSWORD, (whole: string, head: string, password: string) =>
      password === ALREADY_MASKED ? whole : `${head}${REDACTED}@`,
    )
    .replace(QUERY_PASSWORD, `$1${REDACTED}`);
}

/** A copy of `value` safe to log: see the file header. */
export function redactValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return redactText(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= DEPTH_MAX) return '[depth]';
  if (Array.isArray(value)) return value.map((v) => redactValue(v, depth + 1));
  const out: Record<string, unknown> = {};
  const record = value as Record<string, unknown>;
  const secretCommand =
    typeof record.name === 'string' && SECRET_COMMANDS.has(record.name.toLowerCase()) && 'args' in record;
  for (const [key, v] of Object.entries(record)) {
    if (isSecretName(key) || (secretCommand && key === 'args')) out[key] = REDACTED;
    else out[key] = redactValue(v, depth + 1);
  }
  return out;
}

/** pino's error serializer, then redaction of the result (message, stack, causes, extra properties). */
export function errorSerializer(err: unknown): unknown {
  if (!(err instanceof Error)) return redactValue(err);
  return redactValue(pino.stdSerializers.err(err));
}
