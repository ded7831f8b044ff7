// The harness's HA PostgreSQL (a pg_auto_failover formation of a monitor, a primary and two
// standbys, number-sync-standbys 1) behind its one stable endpoint: a writer keeps committing
// through the endpoint while the primary is SIGKILLed, and every commit it was told of is on the
// new primary; a planned switchover and a standby's death lose nothing either. The same writer
// against the formation with number-sync-standbys 0, synchronous_commit local and the standbys'
// WAL senders frozen loses commits in a failover: the check below catches it (the control).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalPgFormation } from '../../../harness/services/local-pg-formation.ts';
import { PrimaryEndpoint } from '../../../harness/services/primary-endpoint.ts';

/** A formation's start (three base backups) and a failover, on a loaded machine. */
const TEST_TIMEOUT_MS = 240_000;

const dir = mkdtempSync(join(tmpdir(), 'pg-formation-test-'));
let formation: LocalPgFormation | null = null;
let endpoint: PrimaryEndpoint | null = null;

beforeAll(async () => {
  formation = await LocalPgFormation.start({ dir, settings: { fsync: 'off' } });
  endpoint = await PrimaryEndpoint.start(formation);
  const c = new pg.Client({ connectionString: endpoint.url });
  await c.connect();
  await c.query('CREATE TABLE acknowledged (n int PRIMARY KEY)');
  await c.end();
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await endpoint?.close();
  await formation?.stop();
  if (process.env.KEEP_FORMATION === undefined) rmSync(dir, { recursive: true, force: true });
});

/**
 * Commits numbered rows through the endpoint, one at a time, until stopped; keeps those whose
 * COMMIT returned, and when the last of them was sent.
 */
function startWriter(url: string, from: number) {
  const acknowledged: number[] = [];
  // Sent before this and answered after: a reply already on its way when the primary died is
  // read after the kill returns, and is no sign that writes resumed.
  let lastAckSentAtMs = 0;
  let failures = 0;
  let stopping = false;
  let lastOkMs = Date.now();
  let longestGapMs = 0;
  const done = (async () => {
    let n = from;
    let client: pg.Client | null = null;
    while (!stopping) {
      try {
        if (client === null) {
          client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1_000 });
          client.on('error', () => undefined);
          await client.connect();
        }
        const sentAtMs = Date.now();
        await client.query('INSERT INTO acknowledged VALUES ($1)', [n]);
        acknowledged.push(n);
        lastAckSentAtMs = sentAtMs;
        const now = Date.now();
        longestGapMs = Math.max(longestGapMs, now - lastOkMs);
        lastOkMs = now;
        n += 1;
      } catch {
        failures += 1;
        await client?.end().catch(() => undefined);
        client = null;
        n += 1;
        await sleep(50);
      }
    }
    await client?.end().catch(() => undefined);
  })();
  return {
    acknowledged,
    get failures() {
      return failures;
    },
    get longestGapMs() {
      return longestGapMs;
    },
    /** Resolves once a commit sent after `sinceMs` is acknowledged (true), or after `timeoutMs` (false). */
    async resumedAfter(sinceMs: number, timeoutMs: number): Promise<boolean> {
      const deadline = Date.now() + timeoutMs;
      while (lastAckSentAtMs <= sinceMs && Date.now() < deadline) await sleep(200);
      return lastAckSentAtMs > sinceMs;
    },
    async stop() {
      stopping = true;
      await done;
    },
  };
}

async function missingOf(url: string, acknowledged: readonly number[]): Promise<number[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const r = await c.query<{ n: number }>('SELECT n FROM acknowledged WHERE n = ANY($1::int[])', [acknowledged]);
    const present = new Set(r.rows.map((row) => row.n));
    return acknowledged.filter((n) => !present.has(n));
  } finally {
    await c.end();
  }
}

describe('LocalPgFormation behind its PrimaryEndpoint', () => {
  it(
    'a SIGKILLed primary is replaced, and every commit acknowledged before is on the new one',
    async () => {
      const f = formation as LocalPgFormation;
      const e = endpoint as PrimaryEndpoint;
      const old = await f.primary();
      expect(old?.name).toBe('node1');
      const writer = startWriter(e.url, 1);
      await sleep(1_500);
      await f.kill(old?.name ?? 'node1');
      const killedAtMs = Date.now();
      // Writes resume through the same address once a standby is promoted.
      const resumed = await writer.resumedAfter(killedAtMs, 60_000);
      await sleep(1_000);
      await writer.stop();
      const now = await f.primary();
      expect(now?.name, `a standby took over\n${(await f.recentEvents()).join('\n')}`).not.toBe(old?.name);
      expect(resumed, 'writes resumed after the failover').toBe(true);
      expect(await missingOf(e.url, writer.acknowledged), 'acknowledged commits missing').toEqual([]);
      expect(writer.longestGapMs, 'the write outage').toBeGreaterThan(1_000);
      await f.restart(old?.name ?? 'node1');
      await f.waitHealthy();
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'a planned switchover and a standby killed and started again lose nothing',
    async () => {
      const f = formation as LocalPgFormation;
      const e = endpoint as PrimaryEndpoint;
      const writer = startWriter(e.url, 1_000_000);
      await sleep(500);
      const old = await f.primary();
      await f.switchover();
      const after = await f.primary();
      expect(after?.name).not.toBe(old?.name);
      await f.waitHealthy();
      const standby = f.nodes.find((n) => n.name !== after?.name);
      await f.kill(standby?.name ?? 'node1');
      await sleep(3_000);
      await f.restart(standby?.name ?? 'node1');
      await f.waitHealthy();
      await writer.stop();
      expect(writer.acknowledged.length).toBeGreaterThan(0);
      expect(await missingOf(e.url, writer.acknowledged)).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  // The negative control of the two above: the same check, on a formation that may lose.
  it(
    'asynchronous standbys held back: a failover loses acknowledged commits, and the check sees them',
    async () => {
      const f = formation as LocalPgFormation;
      const e = endpoint as PrimaryEndpoint;
      await f.setNumberSyncStandbys(0);
      await f.setOnEveryNode('synchronous_commit', 'local');
      // The primary applies the new setting in a state of its own: kill it only once it is back.
      await f.waitHealthy();
      const writer = startWriter(e.url, 2_000_000);
      await sleep(500);
      const frozen = await f.freezeWalSenders();
      expect(frozen.pids.length, 'WAL senders frozen').toBe(2);
      await sleep(1_500);
      const old = await f.primary();
      await f.kill(old?.name ?? 'node1');
      const killedAtMs = Date.now();
      const resumed = await writer.resumedAfter(killedAtMs, 90_000);
      await writer.stop();
      const now = await f.primary();
      expect(now?.name, `a standby took over\n${(await f.recentEvents()).join('\n')}`).not.toBe(old?.name);
      expect(resumed, 'writes resumed after the failover').toBe(true);
      const missing = await missingOf(e.url, writer.acknowledged);
      expect(missing.length, 'acknowledged commits the failover lost').toBeGreaterThan(0);
    },
    TEST_TIMEOUT_MS,
  );
});
