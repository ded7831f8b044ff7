// The PostgreSQL lock service against a real database, as the least-privilege worker role:
// session advisory locks, tokens from the lock_tokens sequence, the session as the lease (its
// end, by pg_terminate_backend or idle_session_timeout, loses every lease on it), releases that
// can only end their own lease, and what advanceFence says after a refusal.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LockLease } from '../../src/lock/lock-service.ts';
import { composeToken } from '../../src/lock/lock-service.ts';
import { PostgresLock } from '../../src/lock/postgres-lock.ts';
import { Watchdog } from '../../src/lock/watchdog.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const TTL_MS = 3_000;
/** Short enough that a silent session is ended within the test. */
const IDLE_TTL_MS = 600;

let db: TestDatabase;
let workerUrl: string;
const opened: PostgresLock[] = [];

function lockOf(options: { lockTtlMs?: number; epoch?: number } = {}): PostgresLock {
  const lock = new PostgresLock({
    connectionString: workerUrl,
    lockTtlMs: options.lockTtlMs ?? TTL_MS,
    keyPrefix: `t${randomUUID().slice(0, 8)}:`,
    acquireAttemptsMax: 1,
    ...(options.epoch === undefined ? {} : { epoch: options.epoch }),
  });
  opened.push(lock);
  return lock;
}

/** A second lock service with the same keys (another process), on a session of its own. */
function rivalOf(lock: PostgresLock, lockTtlMs = TTL_MS): PostgresLock {
  const rival = new PostgresLock({ connectionString: workerUrl, lockTtlMs, keyPrefix: lock.keyPrefix });
  opened.push(rival);
  return rival;
}

async function acquired(lock: PostgresLock, walletId: string): Promise<LockLease> {
  const result = await lock.acquire(walletId);
  if (result.kind !== 'acquired') throw new Error(`expected the lock on ${walletId}, got ${result.kind}`);
  return result.lease;
}

async function lockSessions(): Promise<number[]> {
  const { rows } = await db.pg.query<{ pid: number }>(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'fenced-transfers-lock'",
  );
  return rows.map((r) => r.pid);
}

beforeAll(async () => {
  db = await createTestDatabase('ft_pg_lock');
  workerUrl = (await db.workerRole()).url;
});

afterAll(async () => {
  await Promise.all(opened.map((lock) => lock.close()));
  await db?.drop();
});

describe('PostgresLock', () => {
  it('issues tokens that only grow, refuses a second holder and a second lease in one session', async () => {
    const lock = lockOf();
    const rival = rivalOf(lock);
    const first = await acquired(lock, 'w1');
    expect((await rival.acquire('w1')).kind).toBe('busy');
    expect((await lock.acquire('w1')).kind).toBe('busy');
    expect(await lock.renew('w1', first.owner)).toBe(true);
    expect(await lock.release('w1', first.owner)).toBe(true);
    const second = await acquired(rival, 'w1');
    expect(second.token).toBeGreaterThan(first.token);
    const third = await acquired(lock, 'w2');
    expect(third.token).toBeGreaterThan(second.token);
    await rival.release('w1', second.owner);
    await lock.release('w2', third.owner);
  });

  it('gives one lease per wallet in a process, also to acquires of one turn (advisory locks stack in a session)', async () => {
    const lock = lockOf();
    const wallets = Array.from({ length: 300 }, (_, i) => `t${i % 150}`);
    const results = await Promise.all(wallets.map((w) => lock.acquire(w)));
    const acquired = results.flatMap((r) => (r.kind === 'acquired' ? [r.lease] : []));
    expect(acquired).toHaveLength(150);
    expect(new Set(acquired.map((l) => l.walletId)).size).toBe(150);
    expect(new Set(acquired.map((l) => l.token)).size).toBe(150);
    const released = await Promise.all(acquired.map((l) => lock.release(l.walletId, l.owner)));
    expect(released.every((r) => r)).toBe(true);
    // Released once: a second release of the same lease frees nothing.
    expect(await lock.release(acquired[0]?.walletId ?? '', acquired[0]?.owner ?? '')).toBe(false);
  });

  it('releases only its own lease: a late release after the session ended frees nothing of the next holder', async () => {
    const lock = lockOf();
    const rival = rivalOf(lock);
    const lease = await acquired(lock, 'w1');
    await db.pg.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid', [await lockSessions()]);
    const next = await waitForLease(rival, 'w1');
    expect(next.token).toBeGreaterThan(lease.token);
    expect(await lock.renew('w1', lease.owner)).toBe(false);
    expect(await lock.release('w1', lease.owner)).toBe(false);
    expect(await rival.renew('w1', next.owner)).toBe(true);
    expect((await lockOf().acquire('w1')).kind).toBe('acquired'); // another prefix: another key
    // The terminated side opens a new session for its next acquire.
    const again = await acquired(lock, 'w9');
    expect(await lock.release('w9', again.owner)).toBe(true);
    await rival.release('w1', next.owner);
  });

  it('a holder that sends nothing for a TTL has its session ended by the server, and the watchdog gave up first', async () => {
    const lock = lockOf({ lockTtlMs: IDLE_TTL_MS });
    const rival = rivalOf(lock, IDLE_TTL_MS);
    const lease = await acquired(lock, 'w1');
    const watchdog = Watchdog.start({ renewer: { renew: async () => new Promise<boolean>(() => {}) }, lease });
    // No renewal reaches the server (a frozen process): the watchdog's own deadline ends it.
    await sleep(IDLE_TTL_MS + 50);
    expect(watchdog.signal.aborted).toBe(true);
    const next = await waitForLease(rival, 'w1');
    expect(next.token).toBeGreaterThan(lease.token);
    expect(await lock.renew('w1', lease.owner)).toBe(false);
    watchdog.stop();
    await rival.release('w1', next.owner);
  });

  it('after a refusal: a fence below the sequence is behind us, one at or above it is not, a newer epoch fences us out', async () => {
    const lock = lockOf({ epoch: 1 });
    const lease = await acquired(lock, 'w1');
    await lock.release('w1', lease.owner);
    expect((await lock.advanceFence('w1', lease.token - 1n)).kind).toBe('unchanged');
    expect((await lock.advanceFence('w1', lease.token + 1_000n)).kind).toBe('behind');
    expect((await lock.advanceFence('w1', composeToken(2, 1n))).kind).toBe('superseded');
    expect((await lock.advanceFence('w1', composeToken(0, 10n ** 12n))).kind).toBe('unchanged');
    expect(lease.token >> 53n).toBe(1n);
  });

  it('answers the probe, and reports an unreachable server on it', async () => {
    expect(await lockOf().probe(2_000)).toEqual({ ok: true });
    const nowhere = new PostgresLock({ connectionString: 'postgresql://postgres@127.0.0.1:1/x', lockTtlMs: TTL_MS });
    opened.push(nowhere);
    const probe = await nowhere.probe(2_000);
    expect(probe).toMatchObject({ ok: false, variable: 'LOCK_DATABASE_URL' });
  });
});

async function waitForLease(lock: PostgresLock, walletId: string): Promise<LockLease> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    const result = await lock.acquire(walletId).catch(() => null);
    if (result?.kind === 'acquired') return result.lease;
    if (performance.now() > deadline) throw new Error(`no lease on ${walletId} within 10 s`);
    await sleep(50);
  }
}
