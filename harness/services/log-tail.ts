// Reading what a server this harness started wrote to its log during one start: the size of the
// log before the start (the log is appended to by every start), the text after it, its last lines.
import { closeSync, existsSync, fstatSync, openSync, readSync, statSync } from 'node:fs';

/** Where the next start's lines will begin: the log's size now (0 when there is none). */
export function logOffset(file: string): number {
  return existsSync(file) ? statSync(file).size : 0;
}

/** The text of `file` from byte `offset` on ('' when there is none). */
export function readFrom(file: string, offset: number): string {
  if (!existsSync(file)) return '';
  const fd = openSync(file, 'r');
  try {
    const length = Math.max(fstatSync(fd).size - offset, 0);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, offset);
    return buffer.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** The last `count` lines of `text`, or '(empty)'. */
export function lastLines(text: string, count: number): string {
  return text.trimEnd().split('\n').slice(-count).join('\n') || '(empty)';
}
