// The relay's own PostgreSQL role (`npm run db:relay-role`), made like the worker's
// (worker-role-grants.ts): it may log in, connect to the database, see the schema, read
// _prisma_migrations (its readiness check) and execute RELAY_FUNCTIONS, and nothing else. Those
// claim and mark requests, count lost adds, record give-ups of the re-sends its own claims took
// (not the worker's record_transfer_given_up()), ask which requests are decided, sequence the
// outcome feed, read it and move the publisher's cursor; all are SECURITY DEFINER (the relay-role migration and the
// ones before it), so a relay still does its whole job with no right on any table. The
// redrive is not among them: `npm run redrive` is an operator's command, run as the owner. The
// refusals are the worker role's, and its sessions' bounds become its defaults in the database.
import { WORKER_DB_PASSWORD_PATTERN } from '../config/config.ts';
import { ConfigError, RelayRoleError } from '../errors.ts';
import { OUTCOME_FEED_FUNCTION } from '../intake/outcome-feed.ts';
import { OUTCOME_CURSOR_FUNCTIONS, RELAY_TRACE_CONTEXTS_FUNCTION } from '../intake/outcome-publisher.ts';
import {
  RELAY_BACKLOG_FUNCTION,
  RELAY_CLAIM_FIRST_SENDS_FUNCTION,
  RELAY_CLAIM_RESENDS_FUNCTION,
  RELAY_COUNT_LOST_FUNCTION,
  RELAY_RECORD_GIVEN_UP_FUNCTION,
  RELAY_REQUESTS_DECIDED_FUNCTION,
} from '../intake/relay.ts';
import { FEED_SEQUENCE_FUNCTION } from '../ledger/apply-transfer.ts';
import type { SessionBoundsConfig } from './session-bounds.ts';
import {
  ensureLoginRole,
  expectedRolePrivileges,
  type LoginRoleSpec,
  WORKER_READABLE_TABLES,
  type WorkerRoleResult,
} from './worker-role-grants.ts';

/** Every function the relay role may execute (`regprocedure`, as PostgreSQL prints it). */
export const RELAY_FUNCTIONS: readonly string[] = Object.freeze([
  RELAY_CLAIM_FIRST_SENDS_FUNCTION,
  RELAY_CLAIM_RESENDS_FUNCTION,
  RELAY_COUNT_LOST_FUNCTION,
  RELAY_BACKLOG_FUNCTION,
  RELAY_RECORD_GIVEN_UP_FUNCTION,
  RELAY_REQUESTS_DECIDED_FUNCTION,
  FEED_SEQUENCE_FUNCTION,
  OUTCOME_FEED_FUNCTION,
  ...OUTCOME_CURSOR_FUNCTIONS,
  RELAY_TRACE_CONTEXTS_FUNCTION,
]);

/** The variable the relay role's password is read from (never printed). */
export const RELAY_DB_PASSWORD_VARIABLE = 'RELAY_DB_PASSWORD';

export const RELAY_ROLE_SPEC: LoginRoleSpec = Object.freeze({
  kind: 'relay',
  functionLabel: 'function',
  functions: RELAY_FUNCTIONS,
  // The readiness check reads the migrations applied, as the worker's does.
  readableTables: WORKER_READABLE_TABLES,
  error: RelayRoleError,
});

/** RELAY_DB_PASSWORD, by WORKER_DB_PASSWORD's rule; the value is never quoted back. */
export function loadRelayDbPassword(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const raw = env[RELAY_DB_PASSWORD_VARIABLE];
  if (raw === undefined || raw === '')
    throw new ConfigError(RELAY_DB_PASSWORD_VARIABLE, "is required (the relay role's password)");
  if (!WORKER_DB_PASSWORD_PATTERN.test(raw)) {
    throw new ConfigError(RELAY_DB_PASSWORD_VARIABLE, 'expected 16-256 printable ASCII characters without spaces');
  }
  return raw;
}

/** The privileges the relay role must end with, in rolePrivileges' form. */
export function expectedRelayPrivileges(database: string, schema: string): string[] {
  return expectedRolePrivileges(RELAY_ROLE_SPEC, database, schema);
}

/**
 * Creates the relay's login role, or brings an existing one back to exactly its privileges:
 * ensureLoginRole(), the worker role's mechanism, with its refusals. `ownerUrl` is the owner's URL.
 */
export function ensureRelayRole(
  ownerUrl: string,
  role: string,
  password: string,
  session: SessionBoundsConfig,
): Promise<WorkerRoleResult> {
  return ensureLoginRole(RELAY_ROLE_SPEC, ownerUrl, role, password, session);
}
