// `npm run lock:epoch`: the epochs and the one in force; `--open` opens the next for a lock
// service, `--unless-current` only when the one in force is another service's; usage mistakes
// are refused before the database is touched.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('ft_lock_epoch_cli');
});

afterAll(async () => {
  await db?.drop();
});

interface EpochReport {
  opened?: { epoch: number; backend: string };
  current: { epoch: number; backend: string };
  epochs: { epoch: number; backend: string; note: string | null }[];
}

async function lockEpoch(...args: string[]): Promise<EpochReport> {
  const result = await runSource('src/cli/lock-epoch.ts', args, { DATABASE_URL: db.url });
  expect(result.code, describeRun(result)).toBe(0);
  return lastJsonLine(result) as EpochReport;
}

describe('npm run lock:epoch', () => {
  it('lists the epochs, opens the next, and opens none with --unless-current when it is in force', async () => {
    expect(await lockEpoch()).toMatchObject({ current: { epoch: 0, backend: 'redis' }, epochs: [{ epoch: 0 }] });
    const opened = await lockEpoch('--open', 'etcd', '--note', 'moving to etcd', '--unless-current');
    expect(opened.opened).toEqual({ epoch: 1, backend: 'etcd' });
    expect(opened.epochs.at(-1)).toMatchObject({ epoch: 1, backend: 'etcd', note: 'moving to etcd' });
    const again = await lockEpoch('--open', 'etcd', '--unless-current');
    expect(again.opened).toBeUndefined();
    expect(again.current).toEqual({ epoch: 1, backend: 'etcd' });
    expect((await lockEpoch('--open', 'etcd')).opened).toEqual({ epoch: 2, backend: 'etcd' });
  });

  it('refuses an unknown service and a flag without --open', async () => {
    for (const args of [['--open', 'zookeeper'], ['--unless-current'], ['--note', 'x']]) {
      const result = await runSource('src/cli/lock-epoch.ts', args, { DATABASE_URL: db.url });
      expect(result.code, describeRun(result)).toBe(1);
      expect(result.stderr).toMatch(/usage: npm run lock:epoch/);
    }
  });
});
