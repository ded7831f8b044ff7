// The sweep checks what it wrote (issue 41, item 4.8), as the decisions do: holds_expire() counts
// the wallet rows its release updated against the sources it releases into, and raises when
// they differ, so its statement rolls back and nothing is half-released (a hold marked expired,
// its entries and its event written, its money still held). The fault: a trigger that makes one
// source's row unreachable to the update, in this test's private database only. Before the
// decision-edges migration the sweep answered 1 and left the hold expired with its money held.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { serverErrorOf } from '../../src/db/database-errors.ts';
import { expireHolds } from '../../src/ledger/hold-sweeper.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { applyPayments, balancesOf, entriesOf, holdOf, said } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('ft_sweep');
});
afterAll(async () => {
  await db.drop();
});
beforeEach(async () => {
  await db.truncateAll();
  await db.pg.query('DROP TRIGGER IF EXISTS skip_w1 ON wallets');
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
});

/** Makes w1's row unreachable to any UPDATE: the row is skipped, the statement goes on. */
async function skipUpdatesOfW1(): Promise<void> {
  await db.pg.query(`
    CREATE OR REPLACE FUNCTION skip_w1() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF OLD.id = 'w1' THEN RETURN NULL; END IF;
        RETURN NEW;
    END $$`);
  await db.pg.query('CREATE TRIGGER skip_w1 BEFORE UPDATE ON wallets FOR EACH ROW EXECUTE FUNCTION skip_w1()');
}

async function pendingEvents(operationId: string): Promise<number> {
  const { rows } = await db.pg.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM outcome_pending WHERE operation_id = $1',
    [operationId],
  );
  return rows[0]?.n ?? -1;
}

describe('holds_expire() checks the wallet rows it released into', () => {
  it('raises when a source row was not updated, and releases nothing of the batch', async () => {
    const holds = [
      { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w3', amount: 50n, expiresInMs: 1, fence: 1n },
      { kind: 'hold', operationId: 'h2', from: 'w2', to: 'w3', amount: 30n, expiresInMs: 1, fence: 1n },
    ] as const;
    expect((await applyPayments(db.pg, holds)).map(said)).toEqual(['applied', 'applied']);
    await new Promise((r) => setTimeout(r, 20));
    await skipUpdatesOfW1();

    const refused = await expireHolds(db.prisma).then(
      (released) => ({ released }),
      (err: unknown) => err,
    );
    expect(serverErrorOf(refused)).toMatchObject({
      sqlState: 'XX000',
      message: expect.stringMatching(/holds_expire: 2 wallets to release into but 1 rows were written/),
    });

    // Nothing of the batch happened: both holds active, their money held, no entries, no events.
    expect((await holdOf(db.pg, 'h1'))?.state).toBe('active');
    expect((await holdOf(db.pg, 'h2'))?.state).toBe('active');
    expect(await balancesOf(db.pg, ['w1', '$held:w1', 'w2', '$held:w2'])).toEqual({
      w1: 950n,
      '$held:w1': 50n,
      w2: 970n,
      '$held:w2': 30n,
    });
    expect(await entriesOf(db.pg, '$expiry:h1')).toBe(0);
    expect(await entriesOf(db.pg, '$expiry:h2')).toBe(0);
    expect(await pendingEvents('h1')).toBe(1); // the hold's own decision, no expiry
    expect(await pendingEvents('h2')).toBe(1);

    // The fault gone, the next sweep releases both.
    await db.pg.query('DROP TRIGGER skip_w1 ON wallets');
    expect(await expireHolds(db.prisma)).toBe(2);
    expect(await balancesOf(db.pg, ['w1', '$held:w1', 'w2', '$held:w2'])).toEqual({
      w1: 1_000n,
      '$held:w1': 0n,
      w2: 1_000n,
      '$held:w2': 0n,
    });
  });
});
