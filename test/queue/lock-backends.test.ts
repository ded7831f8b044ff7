// The worker on each lock service it can run with (LOCK_BACKEND), end to end through BullMQ and
// the decision, as the least-privilege role: two workers contend for a few wallets, every
// transfer is decided once, the money adds up, and every fence the database recorded carries the
// epoch the database opened for the backend. A worker whose backend is not the epoch's refuses to
// start. The etcd case runs a private three-member cluster.
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalEtcdCluster, startTempEtcdCluster } from '../../harness/services/local-etcd-cluster.ts';
import type { TransferOutcome } from '../../src/ledger/outcome.ts';
import { openLockEpoch } from '../../src/lock/lock-epochs.ts';
import { runSource } from '../support/cli-process.ts';
import { pipelinePerTest } from '../support/pipeline.ts';
import { spawnWorkerProcess } from '../support/worker-process.ts';

const open = pipelinePerTest();
const WALLETS = 4;
const TRANSFERS = 120;
const AMOUNT = 7n;

/** Two workers of `backend`, contended transfers: each decided once, the money adds up, fences of the epoch. */
async function contendedTransfers(env: Record<string, string>, backend: 'postgres' | 'etcd'): Promise<void> {
  const p = await open({ LOCK_BACKEND: backend, ...env });
  const { epoch } = await openLockEpoch(p.db.pg, backend, 'lock-backends test');
  await p.seed(WALLETS, 10_000n);
  await p.startWorker();
  await p.startWorker();
  const jobs = await Promise.all(
    Array.from({ length: TRANSFERS }, (_, i) =>
      p.addRaw({
        operationId: `${backend}-${i}`,
        from: `w${(i % WALLETS) + 1}`,
        to: `w${((i + 1) % WALLETS) + 1}`,
        amount: AMOUNT.toString(),
      }),
    ),
  );
  const outcomes = (await Promise.all(jobs.map((j) => p.result(j, 60_000)))) as TransferOutcome[];
  expect(outcomes.every((o) => o.outcome === 'applied')).toBe(true);
  for (let i = 0; i < TRANSFERS; i += 1) expect(await p.debitsOf(`${backend}-${i}`)).toBe(1);
  const total = Object.entries(await p.balances())
    .filter(([id]) => /^w\d+$/.test(id))
    .reduce((sum, [, b]) => sum + b, 0n);
  expect(total).toBe(BigInt(WALLETS) * 10_000n);
  const { rows } = await p.db.pg.query<{ epoch: string; n: string }>(
    'SELECT (fence >> 53)::text AS epoch, count(*)::text AS n FROM ledger_entries WHERE operation_id LIKE $1 GROUP BY 1',
    [`${backend}-%`],
  );
  expect(rows).toEqual([{ epoch: String(epoch), n: String(TRANSFERS * 2) }]);
}

describe('LOCK_BACKEND=etcd', () => {
  let cluster: LocalEtcdCluster;
  beforeAll(async () => {
    cluster = await startTempEtcdCluster('lock-backends');
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('two workers decide contended transfers once each, with tokens of the epoch the database opened', async () => {
    await contendedTransfers({ ETCD_ENDPOINTS: cluster.endpoints.join(','), LOCK_TTL_MS: '3000' }, 'etcd');
  });

  it('a worker is not ready while the cluster has no quorum, and ready again once it has', async () => {
    const p = await open({ LOCK_BACKEND: 'etcd', ETCD_ENDPOINTS: cluster.endpoints.join(','), LOCK_TTL_MS: '3000' });
    await openLockEpoch(p.db.pg, 'etcd', 'readiness test');
    const worker = await spawnWorkerProcess(p, { METRICS_PORT: '0' });
    try {
      expect(await worker.readyStatus()).toBe(200);
      const leader = await cluster.waitForLeader();
      const others = [0, 1, 2].filter((i) => i !== leader);
      for (const i of others) await cluster.kill(i);
      await waitForStatus(() => worker.readyStatus(), 503);
      expect(await (await fetch(worker.url('/readyz'))).text()).toMatch(/etcd/);
      for (const i of others) await cluster.restart(i);
      await cluster.waitForLeader();
      await waitForStatus(() => worker.readyStatus(), 200);
    } finally {
      await worker.stop();
    }
  });
});

describe('LOCK_BACKEND=postgres', () => {
  it('two workers decide contended transfers once each, with tokens of the epoch the database opened', async () => {
    await contendedTransfers({ LOCK_TTL_MS: '2000' }, 'postgres');
  });

  it('a worker whose LOCK_BACKEND is not the backend of the epoch in force refuses to start', async () => {
    const p = await open({});
    await openLockEpoch(p.db.pg, 'postgres', 'the fleet moved');
    const result = await runSource(
      'src/cli/worker.ts',
      [],
      { ...p.workerEnv, METRICS_PORT: 'off', STARTUP_TIMEOUT_MS: '20000' },
      60_000,
    );
    expect(result.code).toBe(1);
    expect(result.stderr + result.stdout).toMatch(
      /lock epoch 1 belongs to LOCK_BACKEND=postgres, this process runs redis/,
    );
  });

  it('a running worker stops being ready within a probe round once the epoch moves to another backend', async () => {
    const p = await open({});
    const worker = await spawnWorkerProcess(p, { METRICS_PORT: '0' });
    try {
      expect(await worker.readyStatus()).toBe(200);
      const metrics = await (await fetch(worker.url('/metrics'))).text();
      expect(metrics).toMatch(/fenced_transfers_worker_info\{[^}]*lock_backend="redis"[^}]*\} 1/);
      expect(metrics).toMatch(/fenced_transfers_lock_epoch\{backend="redis"\} 0/);
      await openLockEpoch(p.db.pg, 'etcd', 'the fleet moves to etcd');
      const deadline = performance.now() + 10_000;
      while ((await worker.readyStatus()) === 200 && performance.now() < deadline) await sleep(100);
      expect(await worker.readyStatus()).toBe(503);
      const readyz = await (await fetch(worker.url('/readyz'))).text();
      expect(readyz).toMatch(/lock epoch 1 belongs to LOCK_BACKEND=etcd/);
    } finally {
      await worker.stop();
    }
  });
});

async function waitForStatus(read: () => Promise<number>, status: number, timeoutMs = 20_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while ((await read()) !== status) {
    if (performance.now() > deadline) throw new Error(`no ${status} within ${timeoutMs} ms`);
    await sleep(100);
  }
}
