// The one place that decides whether a failed attempt can clear by itself. Transient errors (a
// server away, a deadlock, a timeout, anything unknown) are retried as they always were;
// permanent ones (PERMANENT_SQLSTATES in the vocabulary, the codes of src/errors.ts that
// permanentKindOfCode() names, a RangeError) put the job
// back, delayed, without spending an attempt, with a reason that names the fix, and the worker
// stops taking jobs for a while (src/ops/fault-hold.ts). None of them fails the job for good: each
// says this worker, its role or its build is wrong, not the job, and the job must still be there
// once that is fixed.

import { type ErrorCode, isFencedTransfersError } from '../errors.ts';
import { postgresErrorCode, RETRYABLE_SQLSTATES } from '../ledger/apply-transfer.ts';
import { PERMANENT_SQLSTATES, type PermanentKind } from '../ledger/vocabulary.ts';

export type AttemptFailure =
  | {
      readonly permanent: false;
      readonly kind: 'transient_error';
      readonly detail: string;
      readonly sqlState: string | null;
      /** One of the SQLSTATEs that mean "try again"; false: unknown, retried all the same. */
      readonly expected: boolean;
    }
  | {
      readonly permanent: true;
      readonly kind: PermanentKind;
      readonly detail: string;
      readonly sqlState: string | null;
    };

/** What to do about each permanent kind, for the role the worker logs in as. */
const FIXES: Readonly<Record<PermanentKind, (role: string) => string>> = {
  permission_denied: (role) => `run npm run db:worker-role -- --role ${role} as the database owner`,
  ledger_contract: () => 'run npm run db:migrate, and workers of the version the database was migrated for',
  lock_protocol: () => 'run one version on every worker; nothing else may write keys under LOCK_KEY_PREFIX',
  internal_error: () => 'a bug: report it with this line, and roll back to the last good version',
};

/** The server's own words for a PostgreSQL error behind a Prisma raw query (its message is long). */
function postgresMessage(err: unknown): string | null {
  const meta = (err as { meta?: { driverAdapterError?: { cause?: { originalMessage?: unknown } } } } | null)?.meta;
  const message = meta?.driverAdapterError?.cause?.originalMessage;
  return typeof message === 'string' ? message : null;
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The user name in a database URL: the role a worker logs in as. */
export function roleOf(databaseUrl: string): string {
  try {
    return decodeURIComponent(new URL(databaseUrl).username) || 'NAME';
  } catch {
    return 'NAME';
  }
}

/**
 * The permanent kind of an error of this package, by its code; undefined: transient. Every code
 * is named here, so a new one does not compile until it is classified.
 */
export function permanentKindOfCode(code: ErrorCode): PermanentKind | undefined {
  switch (code) {
    case 'LEDGER_CONTRACT':
      return 'ledger_contract';
    case 'LOCK_PROTOCOL':
    // The database's lock epoch moved to another lock service: no token of this process passes.
    case 'LOCK_EPOCH':
      return 'lock_protocol';
    // A lost lease, a decision that timed out, a retry the worker asked for: they clear by themselves.
    case 'LOCK_LOST':
    case 'DECISION_TIMEOUT':
    case 'RETRYABLE_TRANSFER':
    // Errors of the commands, the intake, the feed and the history: never thrown inside an attempt, retried if one is.
    case 'CONFIG':
    case 'USAGE':
    case 'STARTUP':
    case 'MIGRATION':
    case 'SESSION_BOUNDS':
    case 'WORKER_ROLE':
    case 'INTAKE_ROLE':
    case 'RELAY_ROLE':
    case 'INVALID_TRANSFER':
    case 'INTAKE_CONFLICT':
    case 'OUTCOME_FEED_PRUNED':
    case 'UNKNOWN_WALLET':
      return undefined;
    default: {
      const unclassified: never = code;
      throw new Error(`unclassified error code ${String(unclassified)}`);
    }
  }
}

/** The permanent kind of an error that is not a PostgreSQL one; undefined: transient. */
function permanentKindOf(err: unknown): PermanentKind | undefined {
  if (isFencedTransfersError(err)) return permanentKindOfCode(err.code);
  // A bound our own code checks (a fence below 1, a batch out of range): a bug, not a server.
  if (err instanceof RangeError) return 'internal_error';
  return undefined;
}

/** Classifies an error an attempt failed with; `role` is the database role the worker logs in as. */
export function classifyAttemptError(err: unknown, role: string): AttemptFailure {
  const sqlState = postgresErrorCode(err);
  const name = err instanceof Error ? err.name : '';
  const kind = (sqlState === null ? undefined : PERMANENT_SQLSTATES[sqlState]) ?? permanentKindOf(err);
  if (kind === undefined) {
    const expected = sqlState !== null && RETRYABLE_SQLSTATES.has(sqlState);
    return { permanent: false, kind: 'transient_error', detail: messageOf(err), sqlState, expected };
  }
  const what =
    sqlState !== null
      ? `${sqlState} ${postgresMessage(err) ?? messageOf(err)} (role ${role})`
      : kind === 'internal_error'
        ? `${name}: ${messageOf(err)}`
        : messageOf(err);
  return { permanent: true, kind, detail: `${what}; ${FIXES[kind](role)}`, sqlState };
}
