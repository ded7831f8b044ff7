// Shared pieces of the lock tests: the shared Redis with a unique key prefix (and its cleanup),
// temp folders, a log capture and clock helpers.
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import type { LocalRedis } from '../../harness/services/local-redis.ts';
import { loadConfig } from '../../src/config/config.ts';
import type { Logger } from '../../src/log/logger.ts';

/**
 * The TTL of a test that holds a lock across renewals for several TTLs: one that outlasts a
 * loaded machine's pauses. With 300 ms, a test process kept off both cores that long (seen beside
 * a full suite) rightly sees its lease lapse between renewals.
 */
export const PATIENT_TTL_MS = 1_500;

/** Keys deleted per DEL while cleaning up. */
const CLEANUP_BATCH_SIZE = 500;

/** The shared Redis of the test run (REDIS_URL, default 127.0.0.1:6379): only ever under a unique prefix. */
export function sharedRedisUrl(): string {
  return loadConfig().redisUrl;
}

/** A prefix no other test file or run uses; only characters FencedLock accepts. */
export function uniqueKeyPrefix(label: string): string {
  return `test:lock:${label}:${randomUUID()}:`;
}

export function connectShared(): Redis {
  return new Redis(sharedRedisUrl(), { maxRetriesPerRequest: 1 });
}

/**
 * A client of a private server that queues commands forever while the server is down
 * (maxRetriesPerRequest: null); the connection errors that a stopped server causes are
 * expected there, so they are not reported as unhandled.
 */
export function connectPrivate(server: LocalRedis): Redis {
  const client = server.client();
  client.on('error', () => {});
  return client;
}

/** Deletes only the keys under `prefix` (never FLUSH a shared server). */
export async function deleteKeysWithPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', CLEANUP_BATCH_SIZE);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

export function makeTempDir(label: string): string {
  return mkdtempSync(join(tmpdir(), `lock-test-${label}-`));
}

export interface CapturedLog {
  readonly logger: Logger;
  readonly entries: Record<string, unknown>[];
  readonly rawLines: string[];
}

/** A debug-level pino logger whose JSON lines are kept in memory, for asserting on fields. */
export function captureLog(): CapturedLog {
  const entries: Record<string, unknown>[] = [];
  const rawLines: string[] = [];
  const logger = pino(
    { level: 'debug' },
    {
      write(line: string): void {
        rawLines.push(line);
        const parsed: unknown = JSON.parse(line);
        if (typeof parsed === 'object' && parsed !== null) entries.push(parsed as Record<string, unknown>);
      },
    },
  );
  return { logger, entries, rawLines };
}

/** Resolves with performance.now() at the moment `signal` fires; rejects after timeoutMs. */
export function abortedAt(signal: AbortSignal, timeoutMs: number): Promise<number> {
  if (signal.aborted) return Promise.resolve(performance.now());
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`signal did not fire within ${timeoutMs} ms`)), timeoutMs);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve(performance.now());
      },
      { once: true },
    );
  });
}

/** Blocks the whole event loop, like a stop-the-world GC pause: no timer or socket callback runs. */
export function freezeEventLoopMs(durationMs: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, durationMs);
}
