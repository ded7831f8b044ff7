// The transactional intake (src/intake/intake.ts): a request commits or rolls back with the
// producer's own transaction, the same body twice is a duplicate, another body a conflict that
// aborts the transaction at once; a Prisma interactive transaction works the same; the SQL
// function's checks and hash are the wire format's; and a decision marks the request decided
// and appends exactly one feed event.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { IntakeConflictError, InvalidTransferError } from '../../src/errors.ts';
import { requestTransfer, requestTransfers } from '../../src/intake/intake.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { requestHash } from '../../src/ledger/request-hash.ts';
import { seedWallets } from '../../src/ledger/seed-wallets.ts';
import {
  CURRENCY_PATTERN,
  ID_PATTERN,
  type TransferRequest,
  type TransferWire,
  validateTransferRequest,
} from '../../src/ledger/transfer-request.ts';
import { settledRead } from '../support/feed.ts';
import { leaseIdFor } from '../support/lease-ids.ts';
import { createTestDatabase, type TestDatabase } from '../support/test-db.ts';

const AMOUNT_MAX = 1_000_000n;
let db: TestDatabase;
let client: pg.PoolClient;

const wire = (operationId: string, amount = '5', extra: Partial<TransferWire> = {}): TransferWire => ({
  operationId,
  from: 'w1',
  to: 'w2',
  amount,
  ...extra,
});

async function requestRows(): Promise<{ operation_id: string; decided: boolean }[]> {
  return (
    await db.pg.query<{ operation_id: string; decided: boolean }>(
      'SELECT operation_id, decided_at IS NOT NULL AS decided FROM transfer_requests ORDER BY operation_id',
    )
  ).rows;
}

beforeAll(async () => {
  db = await createTestDatabase('ft_intake');
});

afterAll(async () => {
  client?.release();
  await db.drop();
});

beforeEach(async () => {
  client?.release();
  await db.truncateAll();
  await seedWallets(db.prisma, { wallets: 3, balanceMinor: 1_000n, prefix: 'w', currency: 'EUR' });
  client = await db.pg.connect();
});

describe('requestTransfer with a pg client in the producer transaction', () => {
  it('ROLLBACK leaves no request, COMMIT leaves one', async () => {
    await client.query('BEGIN');
    expect(await requestTransfer(client, wire('rb-1'), AMOUNT_MAX)).toBe('requested');
    await client.query('ROLLBACK');
    expect(await requestRows()).toEqual([]);
    await client.query('BEGIN');
    expect(await requestTransfer(client, wire('c-1'), AMOUNT_MAX)).toBe('requested');
    await client.query('COMMIT');
    expect(await requestRows()).toEqual([{ operation_id: 'c-1', decided: false }]);
  });

  it('control: a request sent on another connection (a dual write) survives the ROLLBACK, which the check sees', async () => {
    await client.query('BEGIN');
    expect(await requestTransfer(db.pg, wire('dual-1'), AMOUNT_MAX)).toBe('requested');
    await client.query('ROLLBACK');
    expect(await requestRows()).not.toEqual([]);
  });

  it('the same body twice answers duplicate and changes nothing', async () => {
    await requestTransfer(client, wire('d-1'), AMOUNT_MAX);
    const before = (await db.pg.query('SELECT * FROM transfer_requests')).rows;
    await client.query('BEGIN');
    expect(await requestTransfers(client, [wire('d-1'), wire('d-1')], AMOUNT_MAX)).toEqual(['duplicate', 'duplicate']);
    await client.query('COMMIT');
    expect((await db.pg.query('SELECT * FROM transfer_requests')).rows).toEqual(before);
  });

  it('another body is an IntakeConflictError at once, and the transaction is aborted', async () => {
    await requestTransfer(client, wire('x-1'), AMOUNT_MAX);
    await client.query('BEGIN');
    await client.query("UPDATE wallets SET updated_at = now() WHERE id = 'w3'");
    await expect(requestTransfer(client, wire('x-1', '6'), AMOUNT_MAX)).rejects.toThrow(IntakeConflictError);
    await expect(client.query('SELECT 1')).rejects.toMatchObject({ code: '25P02' });
    await client.query('ROLLBACK');
    expect(
      (await db.pg.query("SELECT amount::text AS amount FROM transfer_requests WHERE operation_id = 'x-1'")).rows,
    ).toEqual([{ amount: '5' }]);
  });

  it('refuses what the wire format refuses, with its reason, before any SQL', async () => {
    const bad = [
      wire('bad id'),
      wire('ok-1', '0'),
      wire('ok-2', '5', { currency: 'eur' }),
      { ...wire('ok-3'), extra: 1 } as unknown as TransferWire,
    ];
    for (const w of bad) {
      const verdict = validateTransferRequest(w, AMOUNT_MAX);
      expect(verdict.ok).toBe(false);
      const reason = verdict.ok ? '' : verdict.reason;
      await expect(requestTransfer(client, w, AMOUNT_MAX)).rejects.toThrow(new InvalidTransferError(reason));
    }
    expect(await requestRows()).toEqual([]);
  });
});

describe('requestTransfer with a Prisma interactive transaction', () => {
  it('commits with the transaction, rolls back with it', async () => {
    expect(await db.prisma.$transaction(async (tx) => requestTransfer(tx, wire('pr-1'), AMOUNT_MAX))).toBe('requested');
    await expect(
      db.prisma.$transaction(async (tx) => {
        await requestTransfer(tx, wire('pr-2'), AMOUNT_MAX);
        throw new Error('the producer changes its mind');
      }),
    ).rejects.toThrow('changes its mind');
    await expect(
      db.prisma.$transaction(async (tx) => requestTransfer(tx, wire('pr-1', '7'), AMOUNT_MAX)),
    ).rejects.toThrow(IntakeConflictError);
    expect(await requestRows()).toEqual([{ operation_id: 'pr-1', decided: false }]);
  });
});

describe('request_transfer() in SQL is the wire format', () => {
  const sql = readFileSync(join(MIGRATIONS_DIR, '20261204000000_intake_and_outcome_feed', 'migration.sql'), 'utf8');

  it('has ID_PATTERN and CURRENCY_PATTERN of transfer-request.ts', () => {
    const constant = (name: string) => sql.match(new RegExp(`${name}\\s+CONSTANT TEXT := '([^']*)'`))?.[1];
    expect(constant('c_id_pattern')).toBe(ID_PATTERN.source);
    expect(constant('c_currency_pattern')).toBe(CURRENCY_PATTERN.source);
  });

  it('stores requestHash() of the request, with and without currency', async () => {
    const requests: TransferRequest[] = [
      { operationId: 'h-1', from: 'w1', to: 'w2', amountMinor: 5n, currency: null },
      { operationId: 'h-2', from: 'w2', to: 'w3', amountMinor: 999_999n, currency: 'EUR' },
      { operationId: 'h.3:x-y_z', from: 'w3', to: 'w1', amountMinor: 1n, currency: 'USD' },
    ];
    for (const r of requests) {
      await requestTransfer(
        client,
        {
          operationId: r.operationId,
          from: r.from,
          to: r.to,
          amount: r.amountMinor.toString(),
          ...(r.currency ? { currency: r.currency } : {}),
        },
        AMOUNT_MAX,
      );
      const { rows } = await db.pg.query('SELECT request_hash FROM transfer_requests WHERE operation_id = $1', [
        r.operationId,
      ]);
      expect(rows[0]?.request_hash, r.operationId).toBe(requestHash(r));
    }
  });
});

describe('requests and decisions', () => {
  const request = (operationId: string): TransferRequest => ({
    operationId,
    from: 'w1',
    to: 'w2',
    amountMinor: 5n,
    currency: null,
  });

  it('a request for an operation decided already answers duplicate and is decided; another body is a conflict', async () => {
    await applyTransfers(db.prisma, [{ request: request('pre-1'), fence: 1n, leaseId: leaseIdFor(1n) }]);
    expect(await requestTransfer(client, wire('pre-1'), AMOUNT_MAX)).toBe('duplicate');
    expect(await requestRows()).toEqual([{ operation_id: 'pre-1', decided: true }]);
    await expect(requestTransfer(client, wire('pre-1', '9'), AMOUNT_MAX)).rejects.toThrow(IntakeConflictError);
    expect((await settledRead(db.pg, 0n)).map((e) => e.operationId)).toEqual(['pre-1']);
  });

  it('deciding a requested operation marks it decided and appends exactly one event, even decided twice', async () => {
    await requestTransfer(client, wire('dec-1'), AMOUNT_MAX);
    await applyTransfers(db.prisma, [{ request: request('dec-1'), fence: 1n, leaseId: leaseIdFor(1n) }]);
    await applyTransfers(db.prisma, [{ request: request('dec-1'), fence: 2n, leaseId: leaseIdFor(2n) }]);
    expect(await requestRows()).toEqual([{ operation_id: 'dec-1', decided: true }]);
    const events = await settledRead(db.pg, 0n);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ position: 1n, operationId: 'dec-1', kind: 'applied', amountMinor: 5n });
    expect((await db.pg.query('SELECT count(*)::int AS n FROM outcome_pending')).rows[0].n).toBe(0);
  });
});
