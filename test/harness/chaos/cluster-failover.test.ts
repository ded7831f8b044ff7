// The chaos harness's two failovers on a private cluster of 3 masters with 1 replica each, a
// fault proxy in front of every node: a lossy takeover after the replication link was stalled
// loses exactly the fence increments and lock keys taken during the stall (and the same
// takeover without the stall loses nothing: the measurement can tell the two apart); a killed
// master is replaced by its replica and comes back as a replica. On a queue shard's master, the
// same takeover loses exactly the BullMQ adds acknowledged during the stall (what an intake run
// must recover), and the measurement names their operations.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterFaults } from '../../../harness/chaos/cluster-faults.ts';
import { FaultProxy } from '../../../harness/chaos/fault-proxy.ts';
import { infoField, LocalRedisCluster, type SlotGroup } from '../../../harness/services/local-redis-cluster.ts';
import { FencedLock } from '../../../src/lock/fenced-lock.ts';
import { keySlot } from '../../../src/lock/key-slot.ts';
import { lockKeysOf } from '../../../src/lock/lock-keys.ts';

const PREFIX = 'fo:';
const TTL_MS = 30_000;
const NODE_TIMEOUT_MS = 2_000;
const HEALTHY_TIMEOUT_MS = 60_000;

let cluster: LocalRedisCluster | null = null;
const fronts: FaultProxy[] = [];
let client: Cluster | null = null;
let lock: FencedLock | null = null;
let faults: ClusterFaults | null = null;

beforeAll(async () => {
  cluster = await LocalRedisCluster.start({
    dir: mkdtempSync(join(tmpdir(), 'ft-failover-')),
    masters: 3,
    replicasPerMaster: 1,
    nodeTimeoutMs: NODE_TIMEOUT_MS,
    front: async (index, port) => {
      const proxy = await FaultProxy.start(`node-${index}`, '127.0.0.1', port);
      fronts[index] = proxy;
      return proxy.port;
    },
  });
  client = cluster.client({ redisOptions: { maxRetriesPerRequest: 20 } });
  lock = new FencedLock({ redis: client, lockTtlMs: TTL_MS, keyPrefix: PREFIX });
  faults = new ClusterFaults(cluster, (i) => fronts[i] as FaultProxy, PREFIX);
}, 90_000);

afterAll(async () => {
  client?.disconnect();
  await cluster?.stop();
  await Promise.all(fronts.map((f) => f.close()));
});

function walletIn(group: SlotGroup, tag: string): string {
  for (let i = 0; ; i += 1) {
    const wallet = `${tag}${i}`;
    const slot = keySlot(lockKeysOf(PREFIX, wallet).fenceKey);
    if (slot >= group.fromSlot && slot <= group.toSlot) return wallet;
  }
}

async function tokens(wallet: string, count: number): Promise<bigint> {
  let last = 0n;
  for (let i = 0; i < count; i += 1) {
    const acquired = await lock!.acquire(wallet);
    if (acquired.kind !== 'acquired') throw new Error(`expected the lock on ${wallet}`);
    last = acquired.lease.token;
    await lock!.release(wallet, acquired.lease.owner, acquired.lease.token);
  }
  return last;
}

/** Until the replica has processed everything its master wrote (nothing in flight on the link). */
async function replicaCaughtUp(master: number, replica: number): Promise<void> {
  await cluster!.waitFor(
    async () => {
      const m = Number(
        infoField(String(await cluster!.onNode(master, (c) => c.call('INFO', 'replication'))), 'master_repl_offset'),
      );
      const r = Number(
        infoField(String(await cluster!.onNode(replica, (c) => c.call('INFO', 'replication'))), 'slave_repl_offset'),
      );
      return m === r;
    },
    10_000,
    'replica caught up',
  );
}

describe('failovers on a private cluster with replicas', () => {
  it('sees every replication link in the proxies in front of the masters', () => {
    const links = fronts.reduce((n, f) => n + f.stats.replication, 0);
    expect(links).toBeGreaterThanOrEqual(3);
  });

  it('lossy takeover: loses exactly the fence increments and the lock taken while the link was stalled', async () => {
    const group = cluster!.groups[0] as SlotGroup;
    const wallet = walletIn(group, 'lossy');
    expect(await tokens(wallet, 5)).toBe(5n);
    const roles = await faults!.roles(group);
    await replicaCaughtUp(roles.master, roles.replica);

    await faults!.stallReplication(group);
    expect(await tokens(wallet, 5)).toBe(10n);
    const held = await lock!.acquire(wallet);
    if (held.kind !== 'acquired') throw new Error('expected the lock');
    expect(held.lease.token).toBe(11n);

    const loss = await faults!.lossyTakeover(roles);
    expect(loss.replicationLagBytes).toBeGreaterThan(0);
    expect(loss.heldBytes).toBeGreaterThan(0);
    expect(loss.fenceIncrementsLost).toBe(6);
    expect(loss.fenceKeysBehind).toBe(1);
    expect(loss.walletsBehind).toEqual({ [wallet]: '11' });
    expect(loss.lockKeysLost).toBe(1);
    expect(await cluster!.masterOf(group)).toBe(roles.replica);

    // The new master hands out token 6 again: already used. This is what the database's fence refuses.
    const again = await lock!.acquire(wallet);
    if (again.kind !== 'acquired') throw new Error('the lost lock key leaves the wallet free on the new master');
    expect(again.lease.token).toBe(6n);
    await lock!.release(wallet, again.lease.owner, again.lease.token);
    expect(await lock!.advanceFence(wallet, 11n)).toEqual({ kind: 'raised', fence: 11n });
    expect(await tokens(wallet, 1)).toBe(12n);
  }, 120_000);

  it("lossy takeover of a queue shard's master: loses exactly the adds acknowledged during the stall", async () => {
    const group = cluster!.groups[0] as SlotGroup;
    let prefix = '';
    for (let i = 0; prefix === ''; i += 1) {
      const slot = keySlot(`{fq${i}}:q:meta`);
      if (slot >= group.fromSlot && slot <= group.toSlot) prefix = `{fq${i}}`;
    }
    const connection = cluster!.client({ redisOptions: { maxRetriesPerRequest: null } });
    const queue = new Queue('q', { connection, prefix });
    const add = (ids: string[]) =>
      queue.addBulk(ids.map((id) => ({ name: 'transfer', data: { operationId: id }, opts: { jobId: id } })));
    try {
      await add(['before-1', 'before-2', 'before-3']);
      const roles = await faults!.roles(group);
      await replicaCaughtUp(roles.master, roles.replica);
      await faults!.stallReplication(group);
      // Acknowledged by the master: BullMQ answered with the jobs.
      expect((await add(['during-1', 'during-2', 'during-3', 'during-4'])).map((j) => j.id)).toHaveLength(4);

      const loss = await faults!.lossyTakeover(roles, undefined, [`${prefix}:q`]);
      expect(loss.queueJobsBefore).toBe(7);
      expect(loss.queueJobsLost).toBe(4);
      expect([...loss.lostOperations].sort()).toEqual(['during-1', 'during-2', 'during-3', 'during-4']);
      expect(await cluster!.masterOf(group)).toBe(roles.replica);
      expect(await queue.getJob('during-1')).toBeUndefined();
      expect((await queue.getJob('before-1'))?.data).toEqual({ operationId: 'before-1' });
    } finally {
      await queue.close();
      connection.disconnect();
    }
  }, 120_000);

  it('the same takeover without the stall loses nothing (the measurement tells them apart)', async () => {
    const group = cluster!.groups[1] as SlotGroup;
    const wallet = walletIn(group, 'clean');
    expect(await tokens(wallet, 10)).toBe(10n);
    const held = await lock!.acquire(wallet);
    if (held.kind !== 'acquired') throw new Error('expected the lock');
    const roles = await faults!.roles(group);
    await replicaCaughtUp(roles.master, roles.replica);

    const loss = await faults!.lossyTakeover(roles);
    expect(loss.replicationLagBytes).toBe(0);
    expect(loss.fenceKeysBefore).toBe(1);
    expect(loss.lockKeysBefore).toBe(1);
    expect(loss.fenceIncrementsLost).toBe(0);
    expect(loss.lockKeysLost).toBe(0);
    expect(await cluster!.masterOf(group)).toBe(roles.replica);
    expect((await lock!.acquire(wallet)).kind).toBe('busy');
  }, 120_000);

  it('kill-master: the replica takes over after the node timeout, the old master comes back as its replica', async () => {
    const group = cluster!.groups[2] as SlotGroup;
    const wallet = walletIn(group, 'killed');
    expect(await tokens(wallet, 3)).toBe(3n);
    const roles = await faults!.roles(group);
    await replicaCaughtUp(roles.master, roles.replica);

    const killed = await faults!.killMaster(group);
    const result = await faults!.rejoin(killed);
    expect(result.promotionMs).toBeGreaterThanOrEqual(NODE_TIMEOUT_MS);
    expect(await cluster!.masterOf(group)).toBe(roles.replica);
    expect(await faults!.roles(group)).toEqual({ master: roles.replica, replica: roles.master });
    await cluster!.waitUntilHealthy(HEALTHY_TIMEOUT_MS);
    expect(await tokens(wallet, 1)).toBe(4n);
  }, 120_000);
});
