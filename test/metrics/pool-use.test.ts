// The pool gauges read the worker's real pg pool: with DB_POOL_MAX=1 and one statement holding
// the connection, a second statement waits, and /metrics says so (db_pool_waiting 1, one busy
// connection); once both are done the connection is idle and nothing waits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { poolUseOf } from '../../src/db/prisma.ts';
import { WorkerMetrics } from '../../src/metrics/worker-metrics.ts';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const HOLD_S = 1;
const WAIT_SEEN_TIMEOUT_MS = 5_000;

describe('the PostgreSQL pool gauges', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('ft_pool_use', { DB_POOL_MAX: '1' });
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function scrape(metrics: WorkerMetrics) {
    const families = parsePrometheusText(await metrics.exposition());
    return {
      busy: sampleValue(families, 'fenced_transfers_db_pool_connections', { state: 'busy' }),
      idle: sampleValue(families, 'fenced_transfers_db_pool_connections', { state: 'idle' }),
      waiting: sampleValue(families, 'fenced_transfers_db_pool_waiting'),
    };
  }

  it('count a statement waiting for the one connection, then none', async () => {
    const metrics = new WorkerMetrics({ instanceId: 'w', queueName: 'q' });
    metrics.setPoolUseSource(() => poolUseOf(db.prisma));
    await db.prisma.$queryRawUnsafe('SELECT 1');
    expect(await scrape(metrics)).toEqual({ busy: 0, idle: 1, waiting: 0 });

    // Prisma's queries run once awaited or then()ed: start both now.
    const holding = db.prisma.$queryRawUnsafe(`SELECT pg_sleep(${HOLD_S})::text`).then(() => undefined);
    const waiting = db.prisma.$queryRawUnsafe('SELECT 1').then(() => undefined);
    const deadline = Date.now() + WAIT_SEEN_TIMEOUT_MS;
    let seen = await scrape(metrics);
    while (seen.waiting === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      seen = await scrape(metrics);
    }
    expect(seen).toEqual({ busy: 1, idle: 0, waiting: 1 });
    await Promise.all([holding, waiting]);
    expect(await scrape(metrics)).toEqual({ busy: 0, idle: 1, waiting: 0 });
  });
});
