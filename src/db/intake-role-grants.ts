// The intake's two least-privilege login roles, made like the worker's (worker-role-grants.ts):
// - the producer role (`npm run db:producer-role`) may log in, connect, see the schema and
//   execute request_transfer() and request_operation() (INTAKE_FUNCTION, INTAKE_OPERATION_FUNCTION,
//   and their forms with the producer's trace context, INTAKE_TRACED_FUNCTION and
//   INTAKE_TRACED_OPERATION_FUNCTION):
//   a service requests transfers and payments in its own transaction and can touch no table directly;
// - the read role (`npm run db:read-role`) may do the same with outcome_events_after()
//   (OUTCOME_FEED_FUNCTION), wallet_balance_at() and wallet_statement()
//   (WALLET_BALANCE_AT_FUNCTION, WALLET_STATEMENT_FUNCTION) and operations_matching()
//   (OPERATIONS_MATCHING_FUNCTION): it reads the outcome feed, a wallet's history and the
//   operations recorded, and nothing else.
// Every such function is SECURITY DEFINER (the intake-and-outcome-feed and running-balances migrations). The refusals are
// the worker role's: the caller itself, a role with any power, a member of a role, an owner of
// anything. Its sessions' bounds become its defaults in the database, as for the worker role.
import { WORKER_DB_PASSWORD_PATTERN } from '../config/config.ts';
import { ConfigError, IntakeRoleError } from '../errors.ts';
import {
  INTAKE_FUNCTION,
  INTAKE_OPERATION_FUNCTION,
  INTAKE_TRACED_FUNCTION,
  INTAKE_TRACED_OPERATION_FUNCTION,
} from '../intake/intake.ts';
import { OPERATIONS_MATCHING_FUNCTION } from '../intake/operation-query.ts';
import { OUTCOME_FEED_FUNCTION } from '../intake/outcome-feed.ts';
import { WALLET_BALANCE_AT_FUNCTION, WALLET_STATEMENT_FUNCTION } from '../intake/wallet-history.ts';
import type { SessionBoundsConfig, SessionSetting } from './session-bounds.ts';
import { ensureLoginRole, expectedRolePrivileges, type LoginRoleSpec } from './worker-role-grants.ts';

export type IntakeRoleKind = 'producer' | 'read';

export interface IntakeRoleSpec {
  readonly kind: IntakeRoleKind;
  /** The functions the role may execute (`regprocedure`). */
  readonly fns: readonly string[];
  /** The variable its password is read from (never printed). */
  readonly passwordVariable: string;
}

export const INTAKE_ROLES: Readonly<Record<IntakeRoleKind, IntakeRoleSpec>> = Object.freeze({
  producer: {
    kind: 'producer',
    fns: [INTAKE_FUNCTION, INTAKE_OPERATION_FUNCTION, INTAKE_TRACED_FUNCTION, INTAKE_TRACED_OPERATION_FUNCTION],
    passwordVariable: 'PRODUCER_DB_PASSWORD',
  },
  read: {
    kind: 'read',
    fns: [OUTCOME_FEED_FUNCTION, WALLET_BALANCE_AT_FUNCTION, WALLET_STATEMENT_FUNCTION, OPERATIONS_MATCHING_FUNCTION],
    passwordVariable: 'READ_DB_PASSWORD',
  },
});

/**
 * The role's password from its variable (PRODUCER_DB_PASSWORD or READ_DB_PASSWORD), by WORKER_DB_PASSWORD's
 * rule (printable ASCII without spaces, which SASLprep leaves alone); the value is never quoted back.
 */
export function loadIntakeRolePassword(
  spec: IntakeRoleSpec,
  env: Readonly<Record<string, string | undefined>> = process.env,
): string {
  const raw = env[spec.passwordVariable];
  if (raw === undefined || raw === '')
    throw new ConfigError(spec.passwordVariable, `is required (the ${spec.kind} role's password)`);
  if (!WORKER_DB_PASSWORD_PATTERN.test(raw)) {
    throw new ConfigError(spec.passwordVariable, 'expected 16-256 printable ASCII characters without spaces');
  }
  return raw;
}

export interface IntakeRoleResult {
  role: string;
  kind: IntakeRoleKind;
  database: string;
  schema: string;
  created: boolean;
  privileges: string[];
  sessionDefaults: Record<SessionSetting, string>;
}

function loginRoleSpec(spec: IntakeRoleSpec): LoginRoleSpec {
  return {
    kind: spec.kind,
    functionLabel: 'function',
    functions: spec.fns,
    readableTables: [],
    error: IntakeRoleError,
  };
}

/** The privileges an intake role must end with, in rolePrivileges' form. */
export function expectedIntakeRolePrivileges(spec: IntakeRoleSpec, database: string, schema: string): string[] {
  return expectedRolePrivileges(loginRoleSpec(spec), database, schema);
}

/**
 * Creates the login role, or brings an existing one back to exactly CONNECT, USAGE and EXECUTE
 * on the spec's functions: ensureLoginRole(), the worker role's mechanism, with its refusals.
 * `ownerUrl` is the owner's URL.
 */
export async function ensureIntakeRole(
  spec: IntakeRoleSpec,
  ownerUrl: string,
  role: string,
  password: string,
  session: SessionBoundsConfig,
): Promise<IntakeRoleResult> {
  const result = await ensureLoginRole(loginRoleSpec(spec), ownerUrl, role, password, session);
  const { role: name, database, schema, created, privileges, sessionDefaults } = result;
  return { role: name, kind: spec.kind, database, schema, created, privileges, sessionDefaults };
}
