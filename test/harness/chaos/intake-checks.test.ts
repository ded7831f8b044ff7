// The intake run's checker rules (src/harness/chaos/intake-checks.ts) on synthetic data in a
// private database: requests through the real intake, decisions through the real decision
// (which marks the request decided and appends its event), the feed read back from position 0.
// Each rule passes on the whole data and fails, naming what broke, when its property is broken:
// a transfer acknowledged and never decided, a decision whose event is missing, a gap and a
// repeat in the feed's positions.
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  decisionEventsCheck,
  feedPositionsCheck,
  noneLostCheck,
  readWholeFeed,
  runIntakeChecks,
} from '../../../src/harness/chaos/intake-checks.ts';
import { requestTransfers } from '../../../src/intake/intake.ts';
import type { OutcomeEvent } from '../../../src/intake/outcome-feed.ts';
import { applyTransfers } from '../../../src/ledger/apply-transfer.ts';
import { seedWallets } from '../../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../../support/test-db.ts';

let db: TestDatabase;
let client: pg.Client;
beforeAll(async () => {
  db = await createTestDatabase('ft_intake_checks');
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});
afterAll(async () => {
  await client.end();
  await db.drop();
});
beforeEach(async () => {
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 10_000n, prefix: 'w', currency: 'EUR' });
});

const OPS = ['op-a', 'op-b', 'op-c'];

async function requestAll(): Promise<void> {
  await client.query('BEGIN');
  await requestTransfers(
    client,
    OPS.map((operationId) => ({ operationId, from: 'w1', to: 'w2', amount: '10' })),
    1_000_000n,
  );
  await client.query('COMMIT');
}

async function decide(ops: readonly string[]): Promise<void> {
  await applyTransfers(
    db.prisma,
    ops.map((operationId) => ({
      request: { operationId, from: 'w1', to: 'w2', amountMinor: 10n, currency: null },
      fence: 1n,
      leaseId: leaseIdFor(1n),
    })),
  );
}

const failing = (checks: { name: string; ok: boolean; violations: number }[]) =>
  checks.filter((c) => !c.ok).map((c) => [c.name.split(' (')[0], c.violations]);

describe('intake checks', () => {
  it('pass when every acknowledged transfer is decided once with one event, and the feed is 1..N', async () => {
    await requestAll();
    await decide(OPS);
    const { checks, figures } = await runIntakeChecks(client, { direct: false, acknowledged: new Set(OPS) }, []);
    expect(failing(checks)).toEqual([]);
    expect(checks).toHaveLength(4);
    expect(figures).toMatchObject({ requests: 3, decided: 3, open: 0, lostTransfers: 0, feedEvents: 3 });
    expect(figures.feedLastPosition).toBe(3);
  });

  it('report an acknowledged transfer never decided as lost, and the intake row still open', async () => {
    await requestAll();
    await decide(['op-a', 'op-b']);
    const { checks, figures } = await runIntakeChecks(client, { direct: false, acknowledged: new Set(OPS) }, []);
    expect(failing(checks)).toEqual([
      ['every transfer acknowledged to the producer was decided', 1],
      ['every requested transfer was decided exactly once', 1],
    ]);
    expect(checks[0]?.counterexamples).toEqual([{ operationId: 'op-c', problem: 'lost: never decided' }]);
    expect(figures.lostTransfers).toBe(1);
  });

  it('report lost transfers of a direct-enqueue producer, which has no intake rows', async () => {
    await decide(['op-a']);
    const { checks } = await runIntakeChecks(client, { direct: true, acknowledged: new Set(OPS) }, []);
    expect(checks).toHaveLength(3);
    expect(failing(checks)).toEqual([['every transfer acknowledged to the producer was decided', 2]]);
  });

  it('report a decision whose event is gone, and the gap it leaves in the feed', async () => {
    await requestAll();
    await decide(OPS);
    expect((await readWholeFeed(client)).map((e) => e.position)).toEqual([1n, 2n, 3n]);
    // The owner may; no role of the product can: the feed is append-only in use.
    await client.query('DELETE FROM outcome_events WHERE position = 2');
    const { checks } = await runIntakeChecks(client, { direct: false, acknowledged: new Set(OPS) }, []);
    expect(failing(checks)).toEqual([
      ['every decision has exactly one outcome event', 1],
      ['the outcome feed read from position 0 holds positions 1..N in order, no gap, no repeat', 1],
    ]);
  });

  it('the feed rule finds a gap and a repeat; the event rule an event twice and an event of another status', () => {
    const event = (position: number, operationId: string, kind: OutcomeEvent['kind'] = 'applied'): OutcomeEvent => ({
      position: BigInt(position),
      operationId,
      kind,
      reason: null,
      from: 'w1',
      to: 'w2',
      amountMinor: 10n,
      currency: null,
      decidedAt: new Date(0),
    });
    expect(feedPositionsCheck([event(1, 'a'), event(2, 'b'), event(3, 'c')]).ok).toBe(true);
    const repeat = feedPositionsCheck([event(1, 'a'), event(2, 'b'), event(2, 'c')]);
    expect(repeat.counterexamples).toEqual([{ index: 2, position: '2', problem: 'repeated' }]);
    const gap = feedPositionsCheck([event(1, 'a'), event(3, 'b')]);
    expect(gap.counterexamples).toEqual([{ index: 1, position: '3', expected: '2', problem: 'gap or order' }]);

    const decisions = [
      { operation_id: 'a', status: 'applied' },
      { operation_id: 'b', status: 'rejected' },
    ];
    expect(decisionEventsCheck(decisions, [event(1, 'a'), event(2, 'b', 'rejected')]).ok).toBe(true);
    const twice = decisionEventsCheck(decisions, [event(1, 'a'), event(2, 'a'), event(3, 'b', 'rejected')]);
    expect(twice.violations).toBe(1);
    const wrongKind = decisionEventsCheck(decisions, [event(1, 'a'), event(2, 'b', 'applied')]);
    expect(wrongKind.violations).toBe(1);
    const orphan = decisionEventsCheck(decisions, [event(1, 'a'), event(2, 'b', 'rejected'), event(3, 'x')]);
    expect(orphan.counterexamples).toEqual([{ operationId: 'x', events: 1, problem: 'event without a decision' }]);
    expect(noneLostCheck(new Set(['a', 'b']), new Set(['a', 'b'])).ok).toBe(true);
    expect(noneLostCheck(new Set(['a', 'b']), new Set(['a'])).violations).toBe(1);
  });
});
