// Helpers for the operations tests: scraping a worker's endpoints, waiting for a condition,
// reading a worker's log, the database's counts by status and reason, and the lock keys a
// worker process left in Redis.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { type MetricFamily, parsePrometheusText } from './prometheus-text.ts';

export const HTTP_TIMEOUT_MS = 5_000;
export const WAIT_POLL_MS = 200;

export async function httpStatus(url: string): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    return { status: 0, body: err instanceof Error ? err.message : String(err) };
  }
}

export async function scrape(url: string): Promise<Map<string, MetricFamily>> {
  const res = await fetch(url, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain')) throw new Error(`${url} content-type ${type}`);
  return parsePrometheusText(await res.text());
}

/** Polls `check` until it returns a value other than undefined; throws `what` after timeoutMs. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined> | T | undefined,
): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
  }
}

/** The JSON log lines of a worker log file. */
export function logEvents(file: string): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

export function instanceIdOf(logFile: string): string {
  const started = logEvents(logFile).find((e) => e.event === 'worker_started');
  if (started === undefined || typeof started.instanceId !== 'string')
    throw new Error(`no worker_started line in ${logFile}`);
  return started.instanceId;
}

export interface DatabaseCounts {
  applied: number;
  rejected: number;
  byReason: Record<string, number>;
}

export async function databaseCounts(pool: pg.Pool): Promise<DatabaseCounts> {
  const rows = (
    await pool.query<{ status: string; reason: string | null; n: string }>(
      'SELECT status, reason, count(*) AS n FROM transfers GROUP BY status, reason',
    )
  ).rows;
  const out: DatabaseCounts = { applied: 0, rejected: 0, byReason: {} };
  for (const r of rows) {
    if (r.status === 'applied') out.applied += Number(r.n);
    if (r.status === 'rejected') {
      out.rejected += Number(r.n);
      out.byReason[r.reason ?? ''] = (out.byReason[r.reason ?? ''] ?? 0) + Number(r.n);
    }
  }
  return out;
}

/** Lock keys under `keyPrefix` whose owner id starts with the worker's instance id. */
export async function lockKeysOwnedBy(redis: Redis, keyPrefix: string, instanceId: string): Promise<string[]> {
  const owned: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*:lock`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      const owner = await redis.get(key);
      if (owner?.startsWith(`${instanceId}:`)) owned.push(key);
    }
  } while (cursor !== '0');
  return owned;
}

/** `npm run worker` as a user starts it, with its own output buffers. */
export interface NpmWorker {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

export function startNpmWorker(env: Record<string, string>): NpmWorker {
  const child = spawn('npm', ['run', '-s', 'worker'], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.setEncoding('utf8').on('data', (c: string) => {
    output += c;
  });
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    output += c;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return { child, exited, output: () => output };
}
