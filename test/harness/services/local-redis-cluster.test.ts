// The private cluster the chaos harness and the tests start: a second cluster started in the
// folder of an earlier one (a chaos run repeated with the same --out keeps its nodes.conf)
// starts from nothing instead of refusing with "Slot 0 is already busy".
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LocalRedisCluster } from '../../../src/harness/services/local-redis-cluster.ts';

const root = mkdtempSync(join(tmpdir(), 'local-cluster-test-'));
const started: LocalRedisCluster[] = [];

afterAll(async () => {
  for (const c of started) await c.stop().catch(() => undefined);
  rmSync(root, { recursive: true, force: true });
});

async function clusterState(cluster: LocalRedisCluster): Promise<string> {
  const node = cluster.nodeClient(0);
  try {
    const info = String(await node.cluster('INFO'));
    return /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
  } finally {
    node.disconnect();
  }
}

describe('LocalRedisCluster', () => {
  it('starts afresh in the folder an earlier cluster left behind', async () => {
    const dir = join(root, 'cluster');
    const first = await LocalRedisCluster.start({ dir, masters: 3, removeDirOnStop: false });
    started.push(first);
    expect(await clusterState(first)).toBe('ok');
    await first.stop();
    started.pop();
    expect(existsSync(join(dir, 'node-0', 'nodes.conf'))).toBe(true);

    const second = await LocalRedisCluster.start({ dir, masters: 3, removeDirOnStop: false });
    started.push(second);
    expect(await clusterState(second)).toBe('ok');
  }, 60_000);
});
