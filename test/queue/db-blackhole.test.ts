// A worker whose path to PostgreSQL goes silent with jobs in hand (issue 18, item 2), through a
// fault proxy in front of the shared server that stops forwarding both ways and closes nothing.
// Redis stays fine, so before the fix the watchdog renewed the wallets' locks for as long as the
// silence lasted. Now every wallet the worker held is free for a second lock client within the
// stated bound; and once the path answers again, every transfer ends applied exactly once.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../harness/chaos/fault-proxy.ts';
import { loadConfig } from '../../src/config/config.ts';
import { dbCallDeadlineMs } from '../../src/db/prisma.ts';
import type { TransferOutcome } from '../../src/ledger/outcome.ts';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { FencedLock } from '../../src/lock/fenced-lock.ts';
import { lockConnection } from '../../src/queue/redis-connection.ts';
import { pipelinePerTest } from '../support/pipeline.ts';

const STATEMENT_TIMEOUT_MS = 500;
const TTL_MS = 1_000;
const TRANSFERS = 8;
/**
 * What the worker promises: a lease whose riders get no answer for its decision deadline is given
 * up at its next renewal (every TTL/3) and released at once; a TTL covers both.
 */
const HELD_BOUND_MS = dbCallDeadlineMs({ dbStatementTimeoutMs: STATEMENT_TIMEOUT_MS }) + TTL_MS;
/** How often the lock keys' owners are read, and for how long the silence is watched. */
const SAMPLE_MS = 20;
const OBSERVE_MS = 2 * HELD_BOUND_MS;

const open = pipelinePerTest();
let proxy: FaultProxy | null = null;
afterEach(async () => {
  await proxy?.close();
  proxy = null;
});

describe('the database path blackholed under a worker with jobs in hand', () => {
  it('frees its wallets within the bound, then applies every transfer exactly once', async () => {
    const p = await open({ LOCK_TTL_MS: String(TTL_MS), WORKER_CONCURRENCY: String(TRANSFERS) });
    // A third group of wallets for a warm-up: the worker's pool holds live connections when the
    // path goes silent, as in production (a fresh connection would only meet its connect timeout).
    await p.seed(3 * TRANSFERS, 1_000n);
    const target = new URL(loadConfig().databaseUrl);
    const pg = await FaultProxy.start('blackhole:postgres', target.hostname, Number(target.port || 5432));
    proxy = pg;
    const viaProxy = new URL(p.workerEnv.DATABASE_URL as string);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(pg.port);

    let armed = false;
    let blackholedAtMs = 0;
    await p.startWorker(
      {
        // The first decision about to be sent once armed: the path goes silent under it.
        beforeApply: () => {
          if (!armed || blackholedAtMs > 0) return;
          pg.stall();
          blackholedAtMs = performance.now();
        },
      },
      {
        DATABASE_URL: viaProxy.toString(),
        DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
        TRANSFER_BATCH_WAIT_MS: '50',
      },
    );
    const warmUp = Array.from({ length: TRANSFERS }, (_, i) => ({
      operationId: `op-warm-${i + 1}`,
      from: `w${2 * TRANSFERS + i + 1}`,
      to: `w${2 * TRANSFERS + ((i + 1) % TRANSFERS) + 1}`,
      amount: '1',
    }));
    const warmJobs = await Promise.all(warmUp.map((op) => p.addRaw(op)));
    for (const j of warmJobs) expect(await p.result(j, 30_000)).toMatchObject({ outcome: 'applied' });
    armed = true;
    const ops = Array.from({ length: TRANSFERS }, (_, i) => ({
      operationId: `op-bh-${i + 1}`,
      from: `w${i + 1}`,
      to: `w${i + 1 + TRANSFERS}`,
      amount: '10',
    }));
    const jobs = await Promise.all(ops.map((op) => p.addRaw(op)));

    while (blackholedAtMs === 0) await sleep(10);
    await sleep(200);
    const lockKey = /\{wallet:([^}]+)\}:lock$/;
    const held = (await p.redis.keys(`${p.config.lockKeyPrefix}{wallet:*}:lock`))
      .map((k) => lockKey.exec(k)?.[1])
      .filter((w): w is string => w !== undefined);
    expect(held.length).toBeGreaterThan(0);

    // Every lease the worker holds while the path is silent ends within the bound: its lock keys'
    // owners are read every SAMPLE_MS, and no owner stays on a wallet longer than that. (A wallet
    // can be taken again by the worker's own retry between two leases; each lease is bounded.)
    // And another process's lock client gets every one of those wallets at some point.
    const rivalRedis = lockConnection(p.config);
    const rival = new FencedLock({ redis: rivalRedis, lockTtlMs: TTL_MS, keyPrefix: p.config.lockKeyPrefix });
    try {
      const seen = new Map<string, { firstMs: number; lastMs: number }>();
      const watchUntilMs = performance.now() + OBSERVE_MS;
      const watch = (async () => {
        while (performance.now() < watchUntilMs) {
          for (const walletId of held) {
            const owner = await p.redis.get(`${p.config.lockKeyPrefix}{wallet:${walletId}}:lock`);
            if (owner === null) continue;
            const at = performance.now();
            const span = seen.get(owner) ?? { firstMs: at, lastMs: at };
            span.lastMs = at;
            seen.set(owner, span);
          }
          await sleep(SAMPLE_MS);
        }
      })();
      const freedAfterMs = await Promise.all(
        held.map(async (walletId) => {
          for (;;) {
            const r = await rival.acquire(walletId);
            if (r.kind === 'acquired') {
              const ms = performance.now() - blackholedAtMs;
              await rival.release(walletId, r.lease.owner);
              return ms;
            }
            if (performance.now() > watchUntilMs) return Number.POSITIVE_INFINITY;
            await sleep(5);
          }
        }),
      );
      await watch;
      expect(seen.size).toBeGreaterThan(0);
      for (const [owner, span] of seen) {
        expect(span.lastMs - span.firstMs, owner).toBeLessThanOrEqual(HELD_BOUND_MS);
      }
      for (const ms of freedAfterMs) expect(ms).toBeLessThan(Number.POSITIVE_INFINITY);
    } finally {
      rivalRedis.disconnect();
    }

    // The path comes back: everything is decided, each operation exactly once.
    pg.unstall();
    const outcomes = (await Promise.all(jobs.map((j) => p.result(j, 60_000)))) as TransferOutcome[];
    for (const o of outcomes) expect(['applied', 'duplicate']).toContain(o.outcome);
    for (const op of ops) expect(await p.debitsOf(op.operationId)).toBe(1);
    const balances = await p.balances();
    for (let i = 1; i <= TRANSFERS; i++) {
      expect(balances[`w${i}`]).toBe(990n);
      expect(balances[`w${i + TRANSFERS}`]).toBe(1_010n);
    }
    expect((await reconcile(p.db.prisma)).ok).toBe(true);
  });
});
