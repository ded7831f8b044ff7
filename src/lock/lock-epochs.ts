// Lock epochs: which lock service issues the fencing tokens, recorded in the database
// (lock_epochs, migration 20261226000000_lock_services). A worker reads the epoch in force at
// start and on every readiness probe, issues tokens of it (epoch × 2^53 + its service's number:
// lock-service.ts), and runs only while the epoch is its own backend's: a fleet that moved to
// another lock service cannot be joined by a worker of the old one, and a holder of the old
// epoch still in flight is refused by every wallet a holder of the new one has written.
import { LockEpochError } from '../errors.ts';
import type { LockBackendName } from './lock-service.ts';

/** The lock functions the worker role may execute (worker-role-grants.ts), as PostgreSQL prints them. */
export const LOCK_FUNCTIONS: readonly string[] = Object.freeze([
  'lock_epoch_current()',
  'lock_try_acquire(text[])',
  'lock_release(text[])',
  'lock_tokens_last()',
]);

export interface LockEpoch {
  readonly epoch: number;
  readonly backend: LockBackendName;
}

/** Anything that runs a query and returns rows: a pg Client or Pool. */
export interface Queryable {
  query<R extends object>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** The epoch in force (the newest of lock_epochs). */
export async function currentLockEpoch(db: Queryable): Promise<LockEpoch> {
  const { rows } = await db.query<{ epoch: number; backend: LockBackendName }>(
    'SELECT epoch, backend FROM lock_epoch_current()',
  );
  const row = rows[0];
  if (row === undefined) throw new LockEpochError('lock_epochs is empty: run npm run db:migrate');
  return { epoch: row.epoch, backend: row.backend };
}

/** Null when a worker of `backend` may run in `epoch`; else what to do about it. */
export function lockEpochProblem(epoch: LockEpoch, backend: LockBackendName): string | null {
  if (epoch.backend === backend) return null;
  return `the database's lock epoch ${epoch.epoch} belongs to LOCK_BACKEND=${epoch.backend}, this process runs ${backend}: run it with LOCK_BACKEND=${epoch.backend}, or open an epoch for ${backend} (npm run lock:epoch -- --open ${backend}; docs/operating/lock-services.md)`;
}

/** The epoch in force, when `backend` may issue tokens in it; else LockEpochError saying what to do. */
export async function lockEpochFor(db: Queryable, backend: LockBackendName): Promise<LockEpoch> {
  const epoch = await currentLockEpoch(db);
  const problem = lockEpochProblem(epoch, backend);
  if (problem !== null) throw new LockEpochError(problem);
  return epoch;
}

/** Opens the next epoch for `backend` (as the database's owner) and returns it. */
export async function openLockEpoch(db: Queryable, backend: LockBackendName, note: string): Promise<LockEpoch> {
  const { rows } = await db.query<{ epoch: number }>('SELECT lock_epoch_open($1, $2) AS epoch', [backend, note]);
  const epoch = rows[0]?.epoch;
  if (typeof epoch !== 'number') throw new LockEpochError('lock_epoch_open() returned no epoch');
  return { epoch, backend };
}

/** Every epoch, oldest first, for `npm run lock:epoch`. */
export async function lockEpochHistory(
  db: Queryable,
): Promise<{ epoch: number; backend: string; openedAt: string; note: string | null }[]> {
  const { rows } = await db.query<{ epoch: number; backend: string; opened_at: Date; note: string | null }>(
    'SELECT epoch, backend, opened_at, note FROM lock_epochs ORDER BY epoch',
  );
  return rows.map((r) => ({ epoch: r.epoch, backend: r.backend, openedAt: r.opened_at.toISOString(), note: r.note }));
}
