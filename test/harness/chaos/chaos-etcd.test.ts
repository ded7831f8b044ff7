// The etcd cluster of a `--lock etcd` chaos run (harness/chaos/chaos-etcd.ts), started for real:
// the workers' endpoints are the proxies, a cut proxy refuses them while the harness still reads
// the members, the hold watch follows a key's create revision, and stop() keeps only the logs.
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChaosEtcd, ETCD_CHAOS_MEMBERS, ETCD_HOLD_POLL_MS, EtcdHoldWatch } from '../../../harness/chaos/chaos-etcd.ts';

const PREFIX = 'chaos-etcd-test:';

function through(endpoint: string): Etcd3 {
  return new Etcd3({ hosts: endpoint, defaultCallOptions: () => ({ deadline: Date.now() + 1_000 }) });
}

describe('ChaosEtcd', () => {
  let runDir = '';
  let etcd: ChaosEtcd;

  beforeAll(async () => {
    runDir = mkdtempSync(join(tmpdir(), 'chaos-etcd-test-'));
    etcd = await ChaosEtcd.start(runDir);
  }, 60_000);

  afterAll(async () => {
    await etcd?.stop();
    rmSync(runDir, { recursive: true, force: true });
  });

  it('puts a proxy before each member, and a cut one refuses the workers while the harness reads on', async () => {
    expect(etcd.workerEndpoints).toHaveLength(ETCD_CHAOS_MEMBERS);
    expect(etcd.pids()).toHaveLength(ETCD_CHAOS_MEMBERS);
    const [first] = etcd.workerEndpoints as [string];
    const client = through(first);
    try {
      const before = await etcd.revision();
      await client.put(`${PREFIX}x`).value('1');
      expect(await etcd.revision()).toBeGreaterThan(before);
      etcd.fronts[0]?.cut();
      await expect(client.get(`${PREFIX}x`).string()).rejects.toThrow();
      expect(await etcd.revision()).toBeGreaterThan(before);
    } finally {
      etcd.fronts[0]?.uncut();
      client.close();
    }
  });

  it('watches a hold by its create revision, from first seen to last seen', async () => {
    const client = through(etcd.workerEndpoints[1] as string);
    const watch = new EtcdHoldWatch(etcd, PREFIX);
    try {
      await client.put(`${PREFIX}wallet/w1/lock`).value('owner');
      await sleep(10 * ETCD_HOLD_POLL_MS);
      await client.delete().key(`${PREFIX}wallet/w1/lock`);
      await sleep(2 * ETCD_HOLD_POLL_MS);
    } finally {
      client.close();
    }
    const longestMs = await watch.stop();
    expect(longestMs).toBeGreaterThanOrEqual(6 * ETCD_HOLD_POLL_MS);
    expect(longestMs).toBeLessThan(20 * ETCD_HOLD_POLL_MS);
  });

  it('keeps the members’ logs and removes their data when it stops', async () => {
    const dir = join(runDir, 'etcd');
    await etcd.stop();
    expect(etcd.pids()).toEqual([]);
    const left = readdirSync(dir);
    expect(left.length).toBe(ETCD_CHAOS_MEMBERS);
    for (const name of left) expect(name).toMatch(/^member-\d+\.log$/);
    expect(existsSync(join(dir, 'member-0'))).toBe(false);
  });
});
