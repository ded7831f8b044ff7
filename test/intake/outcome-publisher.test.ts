// The outcome publisher (src/intake/outcome-publisher.ts): one job per feed event in the outcomes
// queue, id `outcome-<position>`, the cursor advanced; two publishers at once, while events keep
// coming, publish every event (no gap) and the cursor ends at the last one; a publisher that dies
// after its adds and before its commit leaves the cursor where it was, and the next round adds the
// same ids (no gap, no second job). Also the relay's lag gauge, read from the intake at scrape time.
import { Queue } from 'bullmq';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import {
  OUTCOMES_QUEUE_CURSOR,
  outcomeJobIdOf,
  outcomesCursor,
  publishOutcomes,
} from '../../src/intake/outcome-publisher.ts';
import { RELAY_METRICS } from '../../src/intake/relay-metrics.ts';
import { Relay } from '../../src/intake/relay-runtime.ts';
import { bullmqConnection, type RedisClient } from '../../src/queue/redis-connection.ts';
import { obliterateQueueNamed } from '../support/pipeline.ts';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

let db: TestDatabase;
let connection: RedisClient;
const queues: Queue[] = [];

beforeAll(async () => {
  db = await createTestDatabase('ft_outpub');
  connection = bullmqConnection(db.config);
});

afterAll(async () => {
  for (const q of queues) {
    await q.obliterate({ force: true }).catch(() => undefined);
    await q.close();
  }
  connection.disconnect();
  await db.drop();
});

function newQueue(): Queue {
  const q = new Queue(uniqueName('outcomes'), { connection });
  queues.push(q);
  return q;
}

/** Requests pub-<from>…pub-<to> (w1 → w2, amount g) and gives each up: one given_up event each. */
async function giveUp(from: number, to: number): Promise<void> {
  const hash = `encode(sha256(convert_to(concat_ws(E'\\n', 'v1', 'w1', 'w2', g::text, ''), 'UTF8')), 'hex')`;
  await db.pg.query(
    `INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount)
     SELECT 'pub-' || g, ${hash}, 'w1', 'w2', g FROM generate_series($1::int, $2::int) g`,
    [from, to],
  );
  await db.pg.query(
    `SELECT record_transfer_given_up('pub-' || g, ${hash}, 'test', 0) FROM generate_series($1::int, $2::int) g`,
    [from, to],
  );
}

async function jobIds(q: Queue): Promise<string[]> {
  const jobs = await q.getJobs(['waiting', 'active', 'completed', 'failed', 'delayed', 'prioritized']);
  // outcome-<position>-<event digest>: the position part, in order.
  return jobs
    .map((j) => (j.id as string).split('-').slice(0, 2).join('-'))
    .sort((a, b) => Number(a.split('-')[1]) - Number(b.split('-')[1]));
}

const idsUpTo = (n: number) => Array.from({ length: n }, (_, i) => `outcome-${i + 1}`);

describe('outcomeJobIdOf', () => {
  it('names the event as well as its position: the same event the same id, another event at that position another', () => {
    const event = { position: 7n, operationId: 'op:with:colons', kind: 'applied' as const };
    expect(outcomeJobIdOf(event)).toBe(outcomeJobIdOf({ ...event }));
    expect(outcomeJobIdOf(event)).toMatch(/^outcome-7-[0-9a-f]{16}$/);
    // A position handed out again after lost commits, to another operation or outcome.
    expect(outcomeJobIdOf({ ...event, operationId: 'op-other' })).not.toBe(outcomeJobIdOf(event));
    expect(outcomeJobIdOf({ ...event, kind: 'rejected' })).not.toBe(outcomeJobIdOf(event));
    expect(outcomeJobIdOf(event), 'BullMQ refuses a : in an id').not.toContain(':');
  });
});

describe('the outcome publisher', () => {
  it('adds one job per event with id outcome-<position>-<event digest>, the event as JSON, and advances the cursor', async () => {
    await db.truncateAll();
    const q = newQueue();
    await giveUp(1, 5);
    const first = await publishOutcomes(db.pg, q, 3);
    expect(first).toEqual({ published: 3, position: 3n });
    expect(await outcomesCursor(db.pg)).toBe(3n);
    expect(await publishOutcomes(db.pg, q, 100)).toEqual({ published: 2, position: 5n });
    expect(await publishOutcomes(db.pg, q, 100)).toEqual({ published: 0, position: 5n });
    expect(await jobIds(q)).toEqual(idsUpTo(5));
    const job = await q.getJob(outcomeJobIdOf({ position: 2n, operationId: 'pub-2', kind: 'given_up' }));
    expect(job?.data).toEqual({
      position: '2',
      operationId: 'pub-2',
      kind: 'given_up',
      reason: 'test',
      from: 'w1',
      to: 'w2',
      amountMinor: '2',
      currency: null,
      decidedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      operation: 'transfer',
      originalId: null,
      detail: null,
      metadata: null,
    });
  });

  it('publishes with a pool of one connection (DB_POOL_MAX=1): the round asks for no second one', async () => {
    // Until the front-door-edges change the round held the cursor's connection and read the feed
    // through the pool: with max 1 that read waited for a connection that never came.
    await db.truncateAll();
    const q = newQueue();
    await giveUp(1, 3);
    const one = new pg.Pool({ connectionString: db.url, max: 1, connectionTimeoutMillis: 2_000 });
    // An idle client the drop's FORCE ends after the pool has let it go must not be an uncaught error.
    one.on('error', () => undefined);
    try {
      expect(await publishOutcomes(one, q, 100)).toEqual({ published: 3, position: 3n });
      expect(await jobIds(q)).toEqual(idsUpTo(3));
    } finally {
      await one.end();
    }
  });

  it('two publishers at once, while events keep coming, publish every event once; the cursor ends at the last', async () => {
    await db.truncateAll();
    const q = newQueue();
    const other = new pg.Pool({ connectionString: db.url, max: 2 });
    // An idle client the drop's FORCE ends after the pool has let it go must not be an uncaught error.
    other.on('error', () => undefined);
    try {
      let writing = true;
      const writer = (async () => {
        for (let i = 0; i < 20; i++) {
          await giveUp(i * 10 + 1, i * 10 + 10);
          await new Promise((r) => setTimeout(r, 5));
        }
        writing = false;
      })();
      const publisher = async (pool: pg.Pool) => {
        let total = 0;
        for (;;) {
          const r = await publishOutcomes(pool, q, 7);
          total += r.published;
          if (!writing && r.published === 0 && r.position === 200n) return total;
        }
      };
      const [a, b] = await Promise.all([publisher(db.pg), publisher(other), writer]);
      expect((a ?? 0) + (b ?? 0)).toBe(200);
      expect(await jobIds(q)).toEqual(idsUpTo(200));
      expect(await outcomesCursor(db.pg, OUTCOMES_QUEUE_CURSOR)).toBe(200n);
    } finally {
      await other.end();
    }
  });

  it('a publisher that dies after its adds keeps the cursor; the next round adds the same ids again', async () => {
    await db.truncateAll();
    const q = newQueue();
    await giveUp(1, 4);
    await expect(
      publishOutcomes(db.pg, q, 100, {
        afterAdd: () => Promise.reject(new Error('killed before the commit')),
      }),
    ).rejects.toThrow('killed');
    expect(await outcomesCursor(db.pg)).toBe(0n);
    expect(await jobIds(q)).toEqual(idsUpTo(4));
    expect(await publishOutcomes(db.pg, q, 100)).toEqual({ published: 4, position: 4n });
    expect(await jobIds(q)).toEqual(idsUpTo(4));
  });

  it('a publisher whose session is terminated while its adds run fails the round, and nothing else (no crash)', async () => {
    // Found by the chaos harness (terminate-backends in an intake run): the cursor's session sits
    // idle in its transaction while the jobs are added; the server ending it then emitted an
    // 'error' on a checked-out client with no listener, which ended the whole relay process.
    await db.truncateAll();
    const q = newQueue();
    await giveUp(1, 3);
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('uncaughtException', onUnhandled);
    try {
      await expect(
        publishOutcomes(db.pg, q, 100, {
          afterAdd: async () => {
            await db.pg.query(
              `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`,
            );
            await new Promise((r) => setTimeout(r, 200));
          },
        }),
      ).rejects.toThrow();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('uncaughtException', onUnhandled);
    }
    expect(await outcomesCursor(db.pg)).toBe(0n);
    expect(await publishOutcomes(db.pg, q, 100)).toEqual({ published: 3, position: 3n });
  });
});

describe("the relay's gauges", () => {
  it('report the lag (age of the oldest request never sent), the open requests and the cursor at scrape time', async () => {
    await db.truncateAll();
    const config = loadConfig({ ...process.env, DATABASE_URL: db.url, QUEUE_NAME: uniqueName('q') });
    const relay = new Relay({ config, logger: pino({ level: 'silent' }) });
    try {
      await requestTransfers(db.pg, [{ operationId: 'lag-1', from: 'w1', to: 'w2', amount: '1' }], 10n);
      await db.pg.query("UPDATE transfer_requests SET requested_at = requested_at - interval '30 seconds'");
      const before = parsePrometheusText(await relay.metrics.exposition());
      expect(sampleValue(before, RELAY_METRICS.lag.name)).toBeGreaterThanOrEqual(30);
      expect(sampleValue(before, RELAY_METRICS.waiting.name)).toBe(1);
      await relay.round();
      const after = parsePrometheusText(await relay.metrics.exposition());
      expect(sampleValue(after, RELAY_METRICS.lag.name)).toBe(0);
      expect(sampleValue(after, RELAY_METRICS.sent.name)).toBe(1);
      expect(sampleValue(after, RELAY_METRICS.waiting.name)).toBe(1);
    } finally {
      await Promise.all(relay.queues.queues.map((q) => q.obliterate({ force: true }).catch(() => undefined)));
      await relay.stop();
      await obliterateQueueNamed(config.outcomesQueueName, connection);
    }
  });
});
