// findOperations() (src/intake/operation-query.ts) over records the real decisions wrote: every
// kind's sides (a deposit's wallet is its `to`, a split's legs are), kinds, statuses, time ranges
// and metadata pairs, each query walked page by page at every page size from 1 and compared with
// the records read straight from the tables; one batch's records (one created_at) in id order; the
// refusals before any query; and the read role, which may call it and read no table.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIntakeRole, INTAKE_ROLES } from '../../src/db/intake-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import type { IntakeClient } from '../../src/intake/intake.ts';
import {
  type FoundOperation,
  findOperations,
  OPERATIONS_MATCHING_FUNCTION,
  type OperationQuery,
} from '../../src/intake/operation-query.ts';
import { decideOperations } from '../../src/ledger/apply-payments.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import type { OperationRequest, TransferRequest } from '../../src/ledger/transfer-request.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

/** Long enough apart that an instant taken between two decisions falls between their records. */
const PAUSE_MS = 15;

let db: TestDatabase;
let fence = 0n;
const at = {} as Record<'t2' | 'deposit', Date>;

async function instant(): Promise<Date> {
  await sleep(PAUSE_MS);
  const now = new Date();
  await sleep(PAUSE_MS);
  return now;
}

/** One decision (one transaction) of `requests`, in order. */
async function decide(...requests: OperationRequest[]): Promise<string[]> {
  fence += 1n;
  const results = await decideOperations(
    db.prisma,
    requests.map((request) => ({ request, fence, leaseId: leaseIdFor(fence) })),
    { holdExpiryMaxMs: 604_800_000 },
  );
  await sleep(PAUSE_MS);
  return results.map((r) => r.outcome);
}

const transfer = (operationId: string, from: string, to: string, amountMinor: bigint, order?: string) =>
  ({
    operationId,
    from,
    to,
    amountMinor,
    currency: null,
    ...(order === undefined ? {} : { metadata: { order } }),
  }) satisfies TransferRequest;

beforeAll(async () => {
  db = await createTestDatabase('ft_opquery');
  await seedWallets(db.prisma, { wallets: 4, balanceMinor: 100n, prefix: 'w', currency: 'EUR' });
  expect(await decide(transfer('t1', 'w1', 'w2', 10n, '8812'))).toEqual(['applied']);
  expect(await decide(transfer('t2', 'w2', 'w3', 5n))).toEqual(['applied']);
  at.t2 = await instant();
  const hold = { kind: 'hold', operationId: 'h1', from: 'w1', to: 'w3', amountMinor: 20n, currency: null } as const;
  expect(await decide({ ...hold, expiresInMs: 600_000, expiresAt: null })).toEqual(['applied']);
  expect(await decide({ kind: 'capture', operationId: 'c1', from: 'w1', hold: 'h1', amountMinor: 5n })).toEqual([
    'applied',
  ]);
  const legs = [
    { to: 'w2', amountMinor: 3n },
    { to: 'w3', amountMinor: 4n },
  ];
  const split = { kind: 'split', operationId: 's1', from: 'w1', legs, currency: 'EUR' } as const;
  expect(await decide({ ...split, metadata: { order: '8812', channel: 'web' } })).toEqual(['applied']);
  at.deposit = await instant();
  const hold2 = { kind: 'hold', operationId: 'h2', from: 'w2', to: 'w4', amountMinor: 2n, currency: null } as const;
  expect(await decide({ ...hold2, expiresInMs: 600_000, expiresAt: null })).toEqual(['applied']);
  expect(await decide({ kind: 'void', operationId: 'v1', from: 'w2', hold: 'h2' })).toEqual(['applied']);
  expect(await decide({ kind: 'refund', operationId: 'f1', from: 'w2', original: 't1', amountMinor: 2n })).toEqual([
    'applied',
  ]);
  const money = { amountMinor: 50n, currency: 'EUR' };
  expect(await decide({ kind: 'deposit', operationId: 'd1', to: 'w4', reference: 'card-1', ...money })).toEqual([
    'applied',
  ]);
  expect(await decide({ kind: 'withdrawal', operationId: 'x1', from: 'w4', reference: 'bank-1', ...money })).toEqual([
    'applied',
  ]);
  const open = {
    kind: 'open_wallet',
    operationId: 'o1',
    wallet: 'w5',
    currency: 'EUR',
    creditLimitMinor: null,
  } as const;
  expect(await decide({ ...open, metadata: { order: '8813' } })).toEqual(['applied']);
  expect(await decide(transfer('r1', 'w3', 'w1', 10_000n))).toEqual(['rejected']);
  // One batch: one transaction, one created_at, in the order of the ids.
  expect(
    await decide(transfer('b3', 'w2', 'w1', 1n), transfer('b1', 'w2', 'w1', 1n), transfer('b2', 'w3', 'w1', 1n)),
  ).toEqual(['applied', 'applied', 'applied']);
}, 60_000);

afterAll(async () => {
  await db.drop();
});

interface Straight {
  operation_id: string;
  kind: string;
  status: string;
  from_wallet: string;
  to_wallet: string | null;
  created_at: Date;
  metadata: Record<string, string> | null;
  legs: string[];
}

/** What `query` must find, from the records read straight from the tables, in the query's order. */
async function expected(query: OperationQuery): Promise<string[]> {
  const { rows } = await db.pg.query<Straight>(`
    SELECT t.operation_id, t.kind, t.status, t.from_wallet, t.to_wallet, t.created_at, t.metadata,
           coalesce((SELECT array_agg(l.to_wallet) FROM split_legs l WHERE l.operation_id = t.operation_id), '{}') AS legs
      FROM transfers t ORDER BY t.created_at, t.operation_id`);
  const side = query.side ?? 'any';
  return rows
    .filter((r) => {
      const from = r.kind === 'deposit' ? null : r.from_wallet;
      const to = [r.to_wallet, ...r.legs];
      const onSide =
        query.wallet === undefined ||
        (side !== 'to' && from === query.wallet) ||
        (side !== 'from' && to.includes(query.wallet));
      const meta = Object.entries(query.metadata ?? {}).every(([k, v]) => r.metadata?.[k] === v);
      return (
        onSide &&
        meta &&
        (query.kind === undefined || r.kind === query.kind) &&
        (query.status === undefined || r.status === query.status) &&
        (query.from === undefined || r.created_at >= query.from) &&
        (query.to === undefined || r.created_at < query.to)
      );
    })
    .map((r) => r.operation_id);
}

/** Every page of the query, following nextCursor until null. */
async function walk(client: IntakeClient, query: OperationQuery): Promise<FoundOperation[]> {
  const found: FoundOperation[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page += 1) {
    const got = await findOperations(client, { ...query, ...(cursor === undefined ? {} : { cursor }) });
    expect(got.operations.length).toBeLessThanOrEqual(query.limit ?? 100);
    found.push(...got.operations);
    if (got.nextCursor === null) return found;
    cursor = got.nextCursor;
  }
  throw new Error('more than 100 pages');
}

const QUERIES: [string, OperationQuery, string[]][] = [
  ['w1 on its from side', { wallet: 'w1', side: 'from' }, ['t1', 'h1', 'c1', 's1']],
  ['w1 on its to side: a refund, a rejected one', { wallet: 'w1', side: 'to' }, ['f1', 'r1', 'b1', 'b2', 'b3']],
  ['w3 on its to side: a hold, its capture, a leg', { wallet: 'w3', side: 'to' }, ['t2', 'h1', 'c1', 's1']],
  ['w3 on any side', { wallet: 'w3' }, ['t2', 'h1', 'c1', 's1', 'r1', 'b2']],
  ['a void is on both sides of its wallet', { wallet: 'w2', kind: 'void' }, ['v1']],
  ['w2 on its from side', { wallet: 'w2', side: 'from' }, ['t2', 'h2', 'v1', 'f1', 'b1', 'b3']],
  ['a deposit is on its wallet`s to side', { wallet: 'w4', side: 'to' }, ['h2', 'd1']],
  ['a withdrawal on its from side', { wallet: 'w4', side: 'from' }, ['x1']],
  ['a wallet operation on its from side', { wallet: 'w5', side: 'from' }, ['o1']],
  ['by kind', { kind: 'split' }, ['s1']],
  ['by status', { status: 'rejected' }, ['r1']],
  ['by kind and status', { kind: 'transfer', status: 'applied' }, ['t1', 't2', 'b1', 'b2', 'b3']],
  ['by metadata', { metadata: { order: '8812' } }, ['t1', 's1']],
  ['by two metadata pairs', { metadata: { order: '8812', channel: 'web' } }, ['s1']],
  ['by metadata and wallet', { metadata: { order: '8812' }, wallet: 'w3', side: 'to' }, ['s1']],
  ['by metadata and kind', { metadata: { order: '8813' }, kind: 'open_wallet' }, ['o1']],
  ['a wallet without a row finds nothing', { wallet: 'nobody' }, []],
];

describe('findOperations', () => {
  it.each(QUERIES)('%s: every page size finds what the tables hold', async (_name, query, ids) => {
    expect(await expected(query)).toEqual(ids);
    for (const limit of [1, 2, 3, 100]) {
      expect(
        (await walk(db.pg, { ...query, limit })).map((o) => o.operationId),
        `limit ${limit}`,
      ).toEqual(ids);
    }
  });

  it('everything, and time ranges, page by page', async () => {
    const everything = await expected({});
    expect(everything).toHaveLength(15);
    for (const query of [{}, { from: at.t2 }, { to: at.deposit }, { from: at.t2, to: at.deposit }]) {
      for (const limit of [1, 4]) {
        const got = (await walk(db.pg, { ...query, limit })).map((o) => o.operationId);
        expect(got, JSON.stringify(query)).toEqual(await expected(query));
      }
    }
    expect((await walk(db.pg, { from: at.t2, to: at.deposit })).map((o) => o.operationId)).toEqual(['h1', 'c1', 's1']);
  });

  it('returns each record as it is kept: the deposit`s wallet as its to, a split`s legs, metadata', async () => {
    const { operations } = await findOperations(db.prisma, { kind: 'split' });
    expect(operations).toEqual([
      expect.objectContaining({
        operationId: 's1',
        kind: 'split',
        status: 'applied',
        reason: null,
        from: 'w1',
        to: null,
        amount: 7n,
        currency: 'EUR',
        metadata: { order: '8812', channel: 'web' },
        legs: [
          { to: 'w2', amount: 3n },
          { to: 'w3', amount: 4n },
        ],
      }),
    ]);
    const s1 = operations[0];
    expect(s1?.atText).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
    const [deposit] = (await findOperations(db.pg, { kind: 'deposit' })).operations;
    expect(deposit).toMatchObject({
      from: null,
      to: 'w4',
      amount: 50n,
      reference: 'card-1',
      legs: null,
      metadata: null,
    });
    const [voided] = (await findOperations(db.pg, { kind: 'void' })).operations;
    expect(voided).toMatchObject({ from: 'w2', to: 'w2', original: 'h2' });
    const [rejected] = (await findOperations(db.pg, { status: 'rejected' })).operations;
    expect(rejected).toMatchObject({ operationId: 'r1', reason: 'insufficient_funds', from: 'w3', to: 'w1' });
  });

  it('refuses what it cannot answer before any query', async () => {
    const refusals: [string, OperationQuery, RegExp][] = [
      ['a side without a wallet', { side: 'from' }, /side is for a query by wallet/],
      ['an unknown side', { wallet: 'w1', side: 'left' as 'from' }, /side must be one of from, to, any/],
      ['an unknown kind', { kind: 'gift' as 'hold' }, /kind must be one of/],
      ['an unknown status', { status: 'pending' as 'applied' }, /status must be one of applied, rejected/],
      ['a wallet id too long', { wallet: 'w'.repeat(129) }, /wallet must be 1 to 128 characters/],
      ['from not before to', { from: at.deposit, to: at.t2 }, /from must be before to/],
      ['an invalid instant', { from: new Date(Number.NaN) }, /from must be a valid Date/],
      ['empty metadata', { metadata: {} }, /metadata must hold a pair/],
      ['metadata out of bounds', { metadata: { 'a b': 'x' } }, /every metadata key must be/],
      ['a limit of 0', { limit: 0 }, /limit must be from 1 to 1000/],
      ['a limit above the page', { limit: 1001 }, /limit must be from 1 to 1000/],
      ['a cursor it did not hand out', { cursor: 'bm90IGEgY3Vyc29y' }, /cursor is not one findOperations/],
    ];
    // A client that fails any query: a refusal must come first.
    const noQuery = {
      query: () => {
        throw new Error('queried');
      },
    } as unknown as IntakeClient;
    for (const [name, query, message] of refusals) {
      await expect(findOperations(noQuery, query), name).rejects.toThrow(message);
      await expect(findOperations(noQuery, query), name).rejects.toBeInstanceOf(RangeError);
    }
    // The function itself refuses what the library would not send.
    await expect(
      db.pg.query(`SELECT * FROM operations_matching(NULL, 'from', NULL, NULL, NULL, NULL, NULL, NULL, NULL, 10)`),
    ).rejects.toMatchObject({ code: '22023' });
  });
});

describe('the read role', () => {
  it('may call it, and reads no table', async () => {
    const role = uniqueName('ft_opq_r');
    const password = randomBytes(16).toString('hex');
    try {
      const made = await ensureIntakeRole(INTAKE_ROLES.read, db.url, role, password, db.config);
      expect(made.privileges).toContain(`FUNCTION public.${OPERATIONS_MATCHING_FUNCTION} EXECUTE`);
      const reader = new pg.Client({ connectionString: roleUrl(db.url, role, password) });
      await reader.connect();
      try {
        const query = { wallet: 'w1', limit: 2 } as const;
        expect(await walk(reader, query)).toEqual(await walk(db.pg, query));
        await expect(reader.query('SELECT 1 FROM transfers LIMIT 1')).rejects.toMatchObject({ code: '42501' });
      } finally {
        await reader.end();
      }
    } finally {
      await dropWorkerRole(db.url, role);
    }
  });
});
