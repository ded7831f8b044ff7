// EtcdLock on a private 3-member etcd cluster (one per file, in a temp folder): tokens from the
// lock key's create revision, busy and owner-only release, two processes contending, a late
// release that cannot delete a newer holder's key, compaction, the fence's recovery, a leader
// change (and the dead owner's lease it stretches), a cluster that answers nothing (the
// watchdog ends the lease by its own deadline) and a cluster without quorum.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pollUntil } from '../../harness/services/bounded-wait.ts';
import { type LocalEtcdCluster, startTempEtcdCluster } from '../../harness/services/local-etcd-cluster.ts';
import { LockLostError } from '../../src/errors.ts';
import { EtcdLock, type EtcdLockOptions } from '../../src/lock/etcd-lock.ts';
import type { AcquireResult, LockLease } from '../../src/lock/lock-service.ts';
import { Watchdog } from '../../src/lock/watchdog.ts';
import { abortedAt, captureLog } from './lock-fixtures.ts';

/** etcd's smallest: leases count whole seconds. */
const TTL_MS = 2_000;
const CALL_TIMEOUT_MS = 500;
/** Timers and a loaded machine: how late the watchdog's abort may come after its deadline. */
const LATE_MS = 1_000;
const CONTENTION_CYCLES = 10;
/** Room for an election (one 1 s election timeout, several after a split vote: up to ~3 s seen) within the lease. */
const LEADER_CHANGE_TTL_MS = 6_000;

let cluster: LocalEtcdCluster;
let raw: Etcd3;
const locks: EtcdLock[] = [];

beforeAll(async () => {
  cluster = await startTempEtcdCluster('lock-test');
  raw = new Etcd3({ hosts: cluster.endpoints });
});

afterAll(async () => {
  await Promise.all(locks.map((lock) => lock.close()));
  raw?.close();
  await cluster?.stop();
});

function newLock(keyPrefix: string, options: Partial<EtcdLockOptions> = {}): EtcdLock {
  const lock = new EtcdLock({
    endpoints: cluster.endpoints,
    lockTtlMs: TTL_MS,
    keyPrefix,
    callTimeoutMs: CALL_TIMEOUT_MS,
    acquireAttemptsMax: 1,
    ...options,
  });
  locks.push(lock);
  return lock;
}

function uniquePrefix(label: string): string {
  return `test:etcd:${label}:${randomUUID()}:`;
}

function expectAcquired(result: AcquireResult): LockLease {
  if (result.kind !== 'acquired') throw new Error(`expected the lock, got ${JSON.stringify(result)}`);
  return result.lease;
}

async function keyOf(lock: EtcdLock, walletId: string) {
  const reply = await raw.kv.range({ key: Buffer.from(lock.keyOf(walletId)) });
  return reply.kvs[0];
}

/** Until an acquire on `lock` succeeds (after an outage: circuits and connections recover), bounded. */
function acquireEventually(lock: EtcdLock, walletId: string): Promise<LockLease> {
  return pollUntil(
    async () => {
      try {
        const result = await lock.acquire(walletId);
        return result.kind === 'acquired' ? { done: true, value: result.lease } : { done: false, seen: 'busy' };
      } catch (err) {
        return { done: false, seen: (err as Error).message };
      }
    },
    { what: `the etcd lock on ${walletId}`, timeoutMs: 15_000, intervalMs: 200 },
  );
}

describe('EtcdLock', () => {
  it('refuses a TTL below two seconds', () => {
    expect(() => newLock('x:', { lockTtlMs: 1_999 })).toThrow(/at least 2000 for etcd/);
  });

  it('issues strictly increasing tokens across holders; busy while held; release and renew by the owner only', async () => {
    const prefix = uniquePrefix('tokens');
    const [a, b] = [newLock(prefix), newLock(prefix)];
    let last = 0n;
    for (let cycle = 0; cycle < 6; cycle += 1) {
      const [holder, other] = cycle % 2 === 0 ? [a, b] : [b, a];
      const lease = expectAcquired(await holder.acquire('w1'));
      expect(lease.token).toBeGreaterThan(last);
      last = lease.token;
      expect((await other.acquire('w1')).kind).toBe('busy');
      expect((await holder.acquire('w1')).kind).toBe('busy');
      expect((await keyOf(holder, 'w1'))?.value.toString()).toBe(lease.owner);
      expect(await other.renew('w1', lease.owner)).toBe(false);
      expect(await other.release('w1', lease.owner)).toBe(false);
      expect(await holder.release('w1', 'not-the-owner')).toBe(false);
      expect(await holder.renew('w1', lease.owner)).toBe(true);
      expect(await holder.release('w1', lease.owner)).toBe(true);
      expect(await keyOf(holder, 'w1')).toBeUndefined();
    }
  });

  it(`keeps ${CONTENTION_CYCLES} cycles each of two processes exclusive, tokens increasing in order`, async () => {
    const prefix = uniquePrefix('contention');
    const processes = [newLock(prefix, { acquireAttemptsMax: 50 }), newLock(prefix, { acquireAttemptsMax: 50 })];
    const tokens: bigint[] = [];
    let inside = 0;
    let overlaps = 0;
    await Promise.all(
      processes.map(async (lock) => {
        for (let cycle = 0; cycle < CONTENTION_CYCLES; cycle += 1) {
          const lease = expectAcquired(await lock.acquireWithRetry('contended'));
          inside += 1;
          if (inside > 1) overlaps += 1;
          tokens.push(lease.token);
          await sleep(2);
          inside -= 1;
          expect(await lock.release('contended', lease.owner)).toBe(true);
        }
      }),
    );
    expect(overlaps).toBe(0);
    expect(tokens).toHaveLength(2 * CONTENTION_CYCLES);
    for (let i = 1; i < tokens.length; i += 1) expect(tokens[i] as bigint).toBeGreaterThan(tokens[i - 1] as bigint);
  });

  it('sends a turn of acquisitions as one transaction per 100 wallets, one lease per wallet in the process', async () => {
    const lock = newLock(uniquePrefix('turn'));
    const wallets = Array.from({ length: 300 }, (_, i) => `t${i % 150}`);
    const results = await Promise.all(wallets.map((w) => lock.acquire(w)));
    const leases = results.flatMap((r) => (r.kind === 'acquired' ? [r.lease] : []));
    expect(leases).toHaveLength(150);
    expect(new Set(leases.map((l) => l.walletId)).size).toBe(150);
    // One transaction, one revision: 150 wallets in two (ETCD_TXN_WALLETS_MAX = 100 per transaction).
    expect(new Set(leases.map((l) => l.token)).size).toBeLessThanOrEqual(2);
    const released = await Promise.all(leases.map((l) => lock.release(l.walletId, l.owner)));
    expect(released.every((r) => r)).toBe(true);
    const again = expectAcquired(await lock.acquire('t0'));
    expect(again.token).toBeGreaterThan(leases.find((l) => l.walletId === 't0')?.token ?? 0n);
    expect(await lock.release('t0', again.owner)).toBe(true);
  });

  it("a late release of an old holder does not delete the newer holder's key", async () => {
    const prefix = uniquePrefix('late-release');
    const [a, b] = [newLock(prefix), newLock(prefix)];
    const old = expectAcquired(await a.acquire('w'));
    // A's lease ends (as if its keep-alives had stopped): its key goes, and B takes the wallet.
    await raw.leaseClient.leaseRevoke({ ID: a.leaseId as string });
    const newer = expectAcquired(await b.acquire('w'));
    expect(newer.token).toBeGreaterThan(old.token);
    expect(await a.release('w', old.owner)).toBe(false);
    const key = await keyOf(b, 'w');
    expect(key?.value.toString()).toBe(newer.owner);
    expect(BigInt(key?.create_revision ?? 0)).toBe(newer.token);
    expect(await b.release('w', newer.owner)).toBe(true);
  });

  it('renews false for every wallet of a lost lease, and acquires again under a new lease', async () => {
    const log = captureLog();
    const lock = newLock(uniquePrefix('lease-lost'), { logger: log.logger });
    const [one, two] = [expectAcquired(await lock.acquire('w1')), expectAcquired(await lock.acquire('w2'))];
    const lost = lock.leaseId as string;
    await raw.leaseClient.leaseRevoke({ ID: lost });
    expect(await lock.renew('w1', one.owner)).toBe(false);
    expect(await lock.renew('w2', two.owner)).toBe(false);
    expect(log.entries.find((e) => e.event === 'lock_lease_lost')).toMatchObject({ leaseId: lost, wallets: 2 });
    const again = expectAcquired(await lock.acquire('w1'));
    expect(lock.leaseId).not.toBe(lost);
    expect(again.token).toBeGreaterThan(two.token);
    expect(await lock.renew('w1', again.owner)).toBe(true);
  });

  it("takes the token from the key's create revision: not its version (1 for every holder) nor its mod revision", async () => {
    const prefix = uniquePrefix('create-revision');
    const [a, b] = [newLock(prefix), newLock(prefix)];
    const first = expectAcquired(await a.acquire('w'));
    const created = await keyOf(a, 'w');
    expect(created?.version).toBe('1');
    expect(BigInt(created?.create_revision ?? 0)).toBe(first.token);
    // The holder writes its key again (same value, same lease): mod revision and version move.
    const key = Buffer.from(a.keyOf('w'));
    await raw.kv.put({ key, value: Buffer.from(first.owner), lease: created?.lease });
    const rewritten = await keyOf(a, 'w');
    expect(BigInt(rewritten?.mod_revision ?? 0)).toBeGreaterThan(first.token);
    expect(rewritten?.version).toBe('2');
    // The release is guarded on the create revision, which did not move.
    expect(await a.release('w', first.owner)).toBe(true);
    const second = expectAcquired(await b.acquire('w'));
    expect((await keyOf(b, 'w'))?.version).toBe('1');
    expect(second.token).toBeGreaterThan(BigInt(rewritten?.mod_revision ?? 0));
    await b.release('w', second.owner);
  });

  it('keeps working across a compaction at the current revision', async () => {
    const lock = newLock(uniquePrefix('compaction'));
    const held = expectAcquired(await lock.acquire('w'));
    for (let i = 0; i < 5; i += 1) await raw.put(`compaction-filler-${randomUUID()}`).value('x');
    const revision = (await raw.kv.range({ key: Buffer.from('any') })).header.revision;
    await raw.kv.compact({ revision, physical: true });
    expect(await lock.renew('w', held.owner)).toBe(true);
    expect(await lock.release('w', held.owner)).toBe(true);
    const next = expectAcquired(await lock.acquire('w'));
    expect(next.token).toBeGreaterThan(BigInt(revision));
    await lock.release('w', next.owner);
  });

  it("raises no fence it cannot: 'unchanged' below the cluster's revision, 'behind' above it", async () => {
    const lock = newLock(uniquePrefix('fence'));
    const held = expectAcquired(await lock.acquire('w'));
    expect((await lock.advanceFence('w', held.token)).kind).toBe('unchanged');
    const rebuilt = await lock.advanceFence('w', 2n ** 52n);
    expect(rebuilt.kind).toBe('behind');
    // The fence says where the cluster is: at the latest create revision, far below the database's.
    expect(rebuilt.fence).toBeGreaterThanOrEqual(held.token);
    expect(rebuilt.fence).toBeLessThan(2n ** 52n);
    await lock.release('w', held.owner);
  });

  it('survives a leader change; a dead owner’s lease outlives its TTL across one (the fence still guards)', async () => {
    // A watchdog renewing every third of 2 s can miss its deadline while an election runs (about
    // one election timeout, 1 s here, with keep-alives timing out meanwhile); etcd's lease itself
    // survives, and a TTL with room for an election keeps the watchdog's too.
    const lock = newLock(uniquePrefix('leader-change'), { lockTtlMs: LEADER_CHANGE_TTL_MS });
    const held = expectAcquired(await lock.acquire('w'));
    const watchdog = Watchdog.start({ renewer: lock, lease: held });
    // A dead owner: a lease granted and never kept alive, with its key.
    const granted = await raw.leaseClient.leaseGrant({ TTL: TTL_MS / 1000 });
    const grantedAtMs = performance.now();
    const deadKey = `dead-owner-${randomUUID()}`;
    await raw.put(deadKey).value('dead').lease(granted.ID);
    await sleep(TTL_MS / 2);
    const leader = await cluster.waitForLeader();
    await cluster.kill(leader);
    await cluster.waitForLeader();
    const gone = await pollUntil(
      async () =>
        (await raw.get(deadKey).string()) === null
          ? { done: true, value: performance.now() }
          : { done: false, seen: 'still there' },
      { what: "the dead owner's key to expire", timeoutMs: 15_000, intervalMs: 50 },
    );
    const livedMs = Math.round(gone - grantedAtMs);
    console.info(
      `etcd-lock.test.ts: a lease of ${TTL_MS} ms whose owner died lived ${livedMs} ms across a leader change`,
    );
    expect(livedMs).toBeGreaterThan(TTL_MS);
    // Meanwhile the live process's lease was renewed through the new leader.
    expect(watchdog.signal.aborted).toBe(false);
    expect(await lock.renew('w', held.owner)).toBe(true);
    watchdog.stop();
    expect(await lock.release('w', held.owner)).toBe(true);
    await cluster.restart(leader);
    await cluster.waitForLeader();
  });

  it('ends the lease by the watchdog’s own deadline when keep-alives get no answer', async () => {
    const log = captureLog();
    const lock = newLock(uniquePrefix('frozen'), { logger: log.logger });
    const held = expectAcquired(await lock.acquire('w'));
    const watchdog = Watchdog.start({ renewer: lock, lease: held });
    const frozenAtMs = performance.now();
    for (let i = 0; i < cluster.size; i += 1) cluster.freeze(i);
    try {
      const firedAtMs = await abortedAt(watchdog.signal, 2 * TTL_MS);
      const reason: unknown = watchdog.signal.reason;
      expect(reason instanceof LockLostError ? reason.reason : reason).toBe('lease_expired');
      expect(firedAtMs - frozenAtMs).toBeLessThan(TTL_MS + LATE_MS);
      // The client reported nothing: the lease was not known lost, only unanswered.
      expect(log.entries.some((e) => e.event === 'lock_lease_lost')).toBe(false);
      expect(log.entries.some((e) => e.event === 'lock_keepalive_failed')).toBe(true);
    } finally {
      for (let i = 0; i < cluster.size; i += 1) cluster.thaw(i);
    }
    await cluster.waitForLeader();
  });

  it('a release that fails gives the lease up, so no key nobody holds outlives a TTL on a live process', async () => {
    const log = captureLog();
    const lock = newLock(uniquePrefix('release-failed'), { logger: log.logger });
    const other = newLock(lock.keyPrefix);
    const held = expectAcquired(await lock.acquire('w'));
    const kept = expectAcquired(await lock.acquire('w2'));
    for (let i = 0; i < cluster.size; i += 1) cluster.freeze(i);
    try {
      await expect(lock.release('w', held.owner)).rejects.toThrow();
    } finally {
      for (let i = 0; i < cluster.size; i += 1) cluster.thaw(i);
    }
    expect(log.entries.find((e) => e.event === 'lock_lease_lost')).toMatchObject({ reason: 'release_failed' });
    // Its other wallets went with the lease; the key the release missed expires with it.
    expect(await lock.renew('w2', kept.owner)).toBe(false);
    const next = await acquireEventually(other, 'w');
    expect(next.token).toBeGreaterThan(held.token);
    await other.release('w', next.owner);
    await cluster.waitForLeader();
  });

  it('without quorum: not ready within its timeout, acquire fails in bounded time; works again after restart', async () => {
    const lock = newLock(uniquePrefix('no-quorum'));
    expectAcquired(await lock.acquire('warm'));
    const leader = await cluster.waitForLeader();
    const killed = [0, 1, 2]
      .filter((i) => i !== leader)
      .slice(0, 1)
      .concat([leader]);
    for (const index of killed) await cluster.kill(index);
    const probeStartMs = performance.now();
    const probe = await lock.probe(1_000);
    expect(performance.now() - probeStartMs).toBeLessThan(1_000 + LATE_MS);
    expect(probe).toMatchObject({ ok: false, variable: 'ETCD_ENDPOINTS' });
    const acquireStartMs = performance.now();
    await expect(lock.acquire('w')).rejects.toThrow();
    expect(performance.now() - acquireStartMs).toBeLessThan(3 * CALL_TIMEOUT_MS + LATE_MS);
    for (const index of killed) await cluster.restart(index);
    await cluster.waitForLeader();
    const lease = await acquireEventually(lock, 'w');
    expect(await lock.renew('w', lease.owner)).toBe(true);
    expect(await lock.probe(1_000)).toEqual({ ok: true });
  });
});
