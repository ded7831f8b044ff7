// Holding accounts (`$held:<wallet>`, whose balance is the wallet's `held`) are the ledger's own:
// only the payment decision and the expiry sweep move them. Connected as the worker role, a
// decision that names one, as a source, a destination or a split's leg, is refused before
// anything is decided: held money stays behind its holds, and the sweep is never stopped by a
// hold its money no longer covers.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { applyPayments, balancesOf, holdsExpire, said } from '../support/payments.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

let db: TestDatabase;
let asWorker: pg.Pool;

beforeAll(async () => {
  db = await createTestDatabase('ft_heldwal');
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  asWorker = new pg.Pool({ connectionString: (await db.workerRole()).url, max: 2 });
  // An idle client the drop's FORCE ends after the pool has let it go must not be an uncaught error.
  asWorker.on('error', () => undefined);
  // 300 of w1 held, expiring in a second.
  expect(
    said(
      (
        await applyPayments(asWorker, [
          { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w2', amount: 300n, expiresInMs: 1_000, fence: 1n },
        ])
      )[0],
    ),
  ).toBe('applied');
});

afterAll(async () => {
  await asWorker?.end();
  await db.drop();
});

async function failure(work: Promise<unknown>): Promise<string> {
  try {
    await work;
    return 'ok';
  } catch (err) {
    return `${(err as { code?: string }).code}: ${(err as Error).message}`;
  }
}

const REFUSED = /^22023: a wallet id starting with \$ is the ledger's own/;

describe('a decision that names a holding account', () => {
  it('apply_transfers() from or to one is refused, and nothing moves', async () => {
    for (const [from, to] of [
      ['$held:w1', 'w3'],
      ['w3', '$held:w1'],
    ]) {
      const sql = `SELECT * FROM apply_transfers(ARRAY['t-${from}'], ARRAY[repeat('a', 64)], ARRAY[$1], ARRAY[$2],
                   ARRAY[100]::bigint[], ARRAY[NULL]::text[], ARRAY[2]::bigint[], ARRAY[$3]::uuid[])`;
      expect(await failure(asWorker.query(sql, [from, to, leaseIdFor(2n)]))).toMatch(REFUSED);
    }
    expect(await balancesOf(db.pg, ['w1', 'w3', '$held:w1'])).toEqual({ w1: 700n, w3: 1_000n, '$held:w1': 300n });
  });

  it("apply_payments() from one, or paying one in a split's leg, is refused", async () => {
    expect(
      await failure(
        applyPayments(asWorker, [
          {
            kind: 'split',
            operationId: 's1',
            from: '$held:w1',
            legs: [
              { to: 'w2', amount: 1n },
              { to: 'w3', amount: 1n },
            ],
            fence: 3n,
          },
        ]),
      ),
    ).toMatch(REFUSED);
    expect(
      await failure(
        applyPayments(asWorker, [
          {
            kind: 'split',
            operationId: 's2',
            from: 'w3',
            legs: [
              { to: 'w2', amount: 1n },
              { to: '$held:w1', amount: 1n },
            ],
            fence: 3n,
          },
        ]),
      ),
    ).toMatch(REFUSED);
    expect(await balancesOf(db.pg, ['w3', '$held:w1'])).toEqual({ w3: 1_000n, '$held:w1': 300n });
  });

  it('so the sweep still releases the hold when it expires', async () => {
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await holdsExpire(asWorker)).toBe(1);
    expect(await balancesOf(db.pg, ['w1', '$held:w1'])).toEqual({ w1: 1_000n, '$held:w1': 0n });
  });
});
