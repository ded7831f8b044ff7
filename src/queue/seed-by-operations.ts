// `npm run db:seed`'s wallets, opened and funded through the path every operation takes: per
// wallet, the fenced lock in Redis (its token and lease) and, in the worker's decision call,
// an `open_wallet` (its currency and credit limit) then a `deposit` of its opening balance from
// its currency's settlement account (once the open applied), each with its record and its
// outcome event. A seeded wallet
// is a wallet opened through the API: the same rows, the same records, the same reconciliation.
//
// Idempotent: a wallet that has a row already is left as it is, and the operation ids
// (`seed:open:<wallet>`, `seed:fund:<wallet>`) answer `duplicate` should two seeds race. `npm run
// demo` seeds this way too; the chaos, bench and scaling harnesses stay bulk inserts
// (src/ledger/seed-wallets.ts): their checkers count every record and event they sent, and the
// bench seeds a million wallets.
import type { PrismaClient } from '../db/prisma.ts';
import { decideOperations } from '../ledger/apply-payments.ts';
import { type SeedRequest, validateSeedRequest } from '../ledger/seed-wallets.ts';
import type { OperationRequest } from '../ledger/transfer-request.ts';
import type { LockLease, LockService } from '../lock/lock-service.ts';
import { releaseWithin } from '../lock/with-lock.ts';

/** Wallets locked and decided at once: one operation each per call, within one decision's 1,000. */
export const SEED_CHUNK_WALLETS = 500;
/** The external reference of a seeded wallet's opening deposit. */
export const SEED_REFERENCE = 'db:seed';
/** A seed decides no hold; the decision call asks for the longest a hold may last all the same. */
const NO_HOLDS_MS = 1_000;

export interface SeedByOperationsResult {
  readonly requested: number;
  /** Wallets opened by this seed. */
  readonly created: number;
  /** Wallets funded by this seed (none when the balance is 0). */
  readonly deposits: number;
  /** Wallets that had a row already, or that another seed or operation opened first: left as they are. */
  readonly existing: number;
}

/** The open of one wallet, with its currency and credit limit. */
const openOf = (wallet: string, req: SeedRequest): OperationRequest => ({
  kind: 'open_wallet',
  operationId: `seed:open:${wallet}`,
  wallet,
  currency: req.currency,
  creditLimitMinor: req.creditLimitMinor ?? 0n,
});

/** The deposit of one wallet's opening balance. */
const depositOf = (wallet: string, req: SeedRequest): OperationRequest => ({
  kind: 'deposit',
  operationId: `seed:fund:${wallet}`,
  to: wallet,
  amountMinor: req.balanceMinor,
  currency: req.currency,
  reference: SEED_REFERENCE,
});

/** Decides each wallet's operation under its lease; answers the wallets whose operation applied. */
async function decided(
  prisma: PrismaClient,
  leases: ReadonlyMap<string, LockLease>,
  wallets: readonly string[],
  operationOf: (wallet: string) => OperationRequest,
): Promise<string[]> {
  const items = wallets.map((wallet) => {
    const lease = leases.get(wallet) as LockLease;
    return { request: operationOf(wallet), fence: lease.token, leaseId: lease.leaseId };
  });
  const results = await decideOperations(prisma, items, { holdExpiryMaxMs: NO_HOLDS_MS });
  return wallets.filter((_, i) => results[i]?.outcome === 'applied');
}

/** Each wallet's lease; a wallet still held by someone else after the lock's retries is an error. */
async function leasesOf(lock: LockService, wallets: readonly string[]): Promise<Map<string, LockLease>> {
  const leases = new Map<string, LockLease>();
  const results = await Promise.allSettled(wallets.map((wallet) => lock.acquireWithRetry(wallet)));
  let failure: unknown = null;
  results.forEach((r, i) => {
    if (r.status === 'rejected') failure ??= r.reason;
    else if (r.value.kind === 'acquired') leases.set(r.value.lease.walletId, r.value.lease);
    else
      failure ??= new Error(
        `wallet ${wallets[i]}: its lock is held by someone else after ${r.value.attempts} attempts`,
      );
  });
  if (failure !== null) {
    await releaseAll(lock, leases);
    throw failure;
  }
  return leases;
}

async function releaseAll(lock: LockService, leases: ReadonlyMap<string, LockLease>): Promise<void> {
  await Promise.all([...leases.values()].map((l) => releaseWithin(lock, l.walletId, l.owner, l.token, lock.lockTtlMs)));
}

/**
 * Opens `req.wallets` wallets `<prefix>1`… with their credit limit and funds each with its
 * balance, through the fenced lock and the decision. Wallets that exist are left as they are.
 *
 * @throws a RangeError for a request out of bounds (validateSeedRequest()); an Error when a
 * wallet's lock stays held by someone else; the driver's or Redis's error else.
 */
export async function seedByOperations(
  prisma: PrismaClient,
  lock: LockService,
  req: SeedRequest,
): Promise<SeedByOperationsResult> {
  validateSeedRequest(req);
  let created = 0;
  let deposits = 0;
  for (let first = 1; first <= req.wallets; first += SEED_CHUNK_WALLETS) {
    const last = Math.min(req.wallets, first + SEED_CHUNK_WALLETS - 1);
    const ids = Array.from({ length: last - first + 1 }, (_, i) => `${req.prefix}${first + i}`);
    const have = await prisma.$queryRaw<{ id: string }[]>`SELECT id FROM wallets WHERE id = ANY (${ids}::text[])`;
    const taken = new Set(have.map((r) => r.id));
    const fresh = ids.filter((id) => !taken.has(id));
    if (fresh.length === 0) continue;
    const leases = await leasesOf(lock, fresh);
    try {
      // Only a wallet this seed opened is funded: one opened by another operation meanwhile
      // (`wallet_exists`) or held to a newer token (`stale_fence`) is left as it is.
      const opened = await decided(prisma, leases, fresh, (wallet) => openOf(wallet, req));
      created += opened.length;
      if (req.balanceMinor > 0n && opened.length > 0) {
        deposits += (await decided(prisma, leases, opened, (wallet) => depositOf(wallet, req))).length;
      }
    } finally {
      await releaseAll(lock, leases);
    }
  }
  return { requested: req.wallets, created, deposits, existing: req.wallets - created };
}
