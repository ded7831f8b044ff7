// One pino logger per process: JSON lines on stderr, so stdout stays free for command output.
import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, name: string): Logger {
  return pino({ level, name, base: { pid: process.pid } }, pino.destination(2));
}
