// Helpers for the operations tests: scraping a worker's endpoints, waiting for a condition,
// reading a worker's log, the database's counts by status and reason, the lock keys a worker
// process left in Redis, and a hold on the wallets' rows that keeps decisions waiting.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { killProcessGroup } from './cli-process.ts';
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

/** Every wallet row locked by a transaction of the test's own, until release(). */
export interface WalletHold {
  /**
   * The decisions (apply_transfers() calls) of sessions logged in as `role` that wait on this
   * hold, directly or queued behind another session that does: none can end before release().
   * Reading another role's statement takes a superuser or pg_read_all_stats, as the tests run.
   */
  waitingDecisionsOf(role: string): Promise<number>;
  /** Ends the transaction (once; later calls do nothing): the waiting decisions go on. */
  release(): Promise<void>;
}

/**
 * Takes every wallet row FOR UPDATE in an open transaction. A decision (apply_transfers() locks
 * the rows of its wallets before anything else) then waits for release(), or until the worker's
 * DB_LOCK_TIMEOUT_MS or DB_STATEMENT_TIMEOUT_MS cancels it, whichever comes first.
 */
export async function holdWallets(pool: pg.Pool): Promise<WalletHold> {
  const client = await pool.connect();
  let released = false;
  const release = async (): Promise<void> => {
    if (released) return;
    released = true;
    try {
      await client.query('ROLLBACK');
      client.release();
    } catch (err) {
      client.release(err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
  };
  let holder: number;
  try {
    await client.query('BEGIN');
    // No server default may end the hold or its wait for the batches in flight.
    await client.query(
      'SET LOCAL idle_in_transaction_session_timeout = 0; SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0',
    );
    // In id order, as apply_transfers() takes them: a batch in flight is waited for, never deadlocked with.
    await client.query('SELECT id FROM wallets ORDER BY id FOR UPDATE');
    const row = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0];
    if (row === undefined) throw new Error('pg_backend_pid() answered no row');
    holder = row.pid;
  } catch (err) {
    await release().catch(() => undefined);
    throw err;
  }
  return {
    async waitingDecisionsOf(role) {
      // On another connection: pg_stat_activity is a snapshot per transaction.
      const r = await pool.query<{ n: number }>(
        `WITH RECURSIVE waiting (pid) AS (
           SELECT $1::integer
           UNION
           SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY (pg_blocking_pids(a.pid))
            WHERE a.datname = current_database()
         )
         SELECT count(*)::integer AS n FROM pg_stat_activity a JOIN waiting w USING (pid)
          WHERE a.usename = $2 AND a.pid <> $1 AND a.query LIKE '%apply_transfers(%'`,
        [holder, role],
      );
      return r.rows[0]?.n ?? 0;
    },
    release,
  };
}

/** `npm run worker` as a user starts it, with its own output buffers. */
export interface NpmWorker {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  /** SIGKILLs npm and the worker under it at once (their own process group). */
  killAll(): void;
}

export function startNpmWorker(env: Record<string, string>): NpmWorker {
  const child = spawn('npm', ['run', '-s', 'worker'], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
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
  return { child, exited, output: () => output, killAll: () => killProcessGroup(child) };
}
