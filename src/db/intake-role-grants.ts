// The intake's two least-privilege login roles, made like the worker's (worker-role-grants.ts):
// - the producer role (`npm run db:producer-role`) may log in, connect, see the schema and
//   execute request_transfer() (INTAKE_FUNCTION): a service requests transfers in its own
//   transaction and can touch no table directly;
// - the read role (`npm run db:read-role`) may do the same with outcome_events_after()
//   (OUTCOME_FEED_FUNCTION): it reads the outcome feed and nothing else.
// Both functions are SECURITY DEFINER (the intake-and-outcome-feed migration). The refusals are
// the worker role's: the caller itself, a role with any power, a member of a role, an owner of
// anything. Its sessions' bounds become its defaults in the database, as for the worker role.
import pg from 'pg';
import { ConfigError, databaseName } from '../config/config.ts';
import { INTAKE_FUNCTION } from '../intake/intake.ts';
import { OUTCOME_FEED_FUNCTION } from '../intake/outcome-feed.ts';
import { type SessionBoundsConfig, type SessionSetting, setRoleSessionBounds } from './session-bounds.ts';
import {
  ROLE_NAME_PATTERN,
  rolePrivileges,
  scramSha256Verifier,
  WORKER_ROLE_ADVISORY_LOCK_KEY,
  WorkerRoleError,
} from './worker-role-grants.ts';

export type IntakeRoleKind = 'producer' | 'read';

export interface IntakeRoleSpec {
  readonly kind: IntakeRoleKind;
  /** The one function the role may execute (`regprocedure`). */
  readonly fn: string;
  /** The variable its password is read from (never printed). */
  readonly passwordVariable: string;
}

export const INTAKE_ROLES: Readonly<Record<IntakeRoleKind, IntakeRoleSpec>> = Object.freeze({
  producer: { kind: 'producer', fn: INTAKE_FUNCTION, passwordVariable: 'PRODUCER_DB_PASSWORD' },
  read: { kind: 'read', fn: OUTCOME_FEED_FUNCTION, passwordVariable: 'READ_DB_PASSWORD' },
});

/** A WorkerRoleError, so the commands report it in one line like the worker role's refusals. */
export class IntakeRoleError extends WorkerRoleError {
  override name = 'IntakeRoleError';
}

/** Same alphabet and length as WORKER_DB_PASSWORD: printable ASCII without space (SASLprep leaves them alone). */
const ROLE_PASSWORD_PATTERN = /^[\x21-\x7e]{16,256}$/;

/** The role's password from its variable (PRODUCER_DB_PASSWORD or READ_DB_PASSWORD); the value is never quoted back. */
export function loadIntakeRolePassword(
  spec: IntakeRoleSpec,
  env: Readonly<Record<string, string | undefined>> = process.env,
): string {
  const raw = env[spec.passwordVariable];
  if (raw === undefined || raw === '')
    throw new ConfigError(spec.passwordVariable, `is required (the ${spec.kind} role's password)`);
  if (!ROLE_PASSWORD_PATTERN.test(raw)) {
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

/** The privileges an intake role must end with, in rolePrivileges' form. */
export function expectedIntakeRolePrivileges(spec: IntakeRoleSpec, database: string, schema: string): string[] {
  const ident = (s: string) => (/^[a-z_][a-z0-9_]*$/.test(s) ? s : `"${s.replace(/"/g, '""')}"`);
  return [
    `DATABASE ${ident(database)} CONNECT`,
    `SCHEMA ${ident(schema)} USAGE`,
    `FUNCTION ${ident(schema)}.${spec.fn} EXECUTE`,
  ].sort();
}

/**
 * Creates the login role, or brings an existing one back to exactly CONNECT, USAGE and EXECUTE
 * on the spec's function. Refuses what ensureWorkerRole refuses. `ownerUrl` is the owner's URL.
 */
export async function ensureIntakeRole(
  spec: IntakeRoleSpec,
  ownerUrl: string,
  role: string,
  password: string,
  session: SessionBoundsConfig,
): Promise<IntakeRoleResult> {
  if (!ROLE_NAME_PATTERN.test(role)) {
    throw new IntakeRoleError(
      `role name must be 1-63 characters of [a-z0-9_], not starting with a digit; got ${JSON.stringify(role)}`,
    );
  }
  const database = databaseName(ownerUrl);
  const client = new pg.Client({ connectionString: ownerUrl, application_name: 'fenced-transfers-admin' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [WORKER_ROLE_ADVISORY_LOCK_KEY]);
    const {
      rows: [where],
    } = await client.query<{ schema: string; me: string }>('SELECT current_schema() AS schema, current_user AS me');
    if (where === undefined) throw new IntakeRoleError('cannot read the current schema');
    const { schema } = where;
    if (role === where.me)
      throw new IntakeRoleError(`${role} is the role running this command (the owner); choose another name`);
    const found = await client.query('SELECT to_regprocedure($1) IS NOT NULL AS ok', [`${schema}.${spec.fn}`]);
    if (found.rows[0]?.ok !== true)
      throw new IntakeRoleError(`function ${spec.fn} is missing in schema ${schema}: run npm run db:migrate first`);

    const {
      rows: [existing],
    } = await client.query<Record<string, boolean>>(
      'SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = $1',
      [role],
    );
    if (existing !== undefined) {
      const powers = Object.entries(existing)
        .filter(([, on]) => on)
        .map(([k]) => k.replace(/^rol/, ''));
      if (powers.length > 0)
        throw new IntakeRoleError(
          `${role} already exists with ${powers.join(', ')}; the ${spec.kind} role must have none`,
        );
      const member = await client.query<{ g: string }>(
        'SELECT g.rolname AS g FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = $1',
        [role],
      );
      if (member.rows.length > 0) {
        throw new IntakeRoleError(
          `${role} is a member of ${member.rows.map((r) => r.g).join(', ')}; the ${spec.kind} role must inherit nothing`,
        );
      }
      const owns = await client.query<{ n: string }>(
        `
        SELECT count(*)::text AS n FROM (
          SELECT relowner AS o FROM pg_class UNION ALL SELECT proowner FROM pg_proc
          UNION ALL SELECT nspowner FROM pg_namespace UNION ALL SELECT datdba FROM pg_database WHERE datname = current_database()
        ) x JOIN pg_roles r ON r.oid = x.o WHERE r.rolname = $1`,
        [role],
      );
      if (owns.rows[0]?.n !== '0')
        throw new IntakeRoleError(`${role} owns objects in ${database}; the ${spec.kind} role must own nothing`);
    }

    const roleIdent = client.escapeIdentifier(role);
    const verifier = client.escapeLiteral(scramSha256Verifier(password));
    await client.query(
      existing === undefined
        ? `CREATE ROLE ${roleIdent} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD ${verifier}`
        : `ALTER ROLE ${roleIdent} LOGIN PASSWORD ${verifier}`,
    );

    // Back to nothing: whatever an earlier version or a person granted goes.
    const schemas = await client.query<{ nspname: string }>(
      "SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'",
    );
    for (const { nspname } of schemas.rows) {
      const s = client.escapeIdentifier(nspname);
      await client.query(`REVOKE ALL ON ALL TABLES IN SCHEMA ${s} FROM ${roleIdent}`);
      await client.query(`REVOKE ALL ON ALL SEQUENCES IN SCHEMA ${s} FROM ${roleIdent}`);
      await client.query(`REVOKE ALL ON ALL ROUTINES IN SCHEMA ${s} FROM ${roleIdent}`);
      await client.query(`REVOKE ALL ON SCHEMA ${s} FROM ${roleIdent}`);
    }
    const db = client.escapeIdentifier(database);
    const sc = client.escapeIdentifier(schema);
    await client.query(`REVOKE ALL ON DATABASE ${db} FROM ${roleIdent}`);
    await client.query(`GRANT CONNECT ON DATABASE ${db} TO ${roleIdent}`);
    await client.query(`GRANT USAGE ON SCHEMA ${sc} TO ${roleIdent}`);
    await client.query(`GRANT EXECUTE ON FUNCTION ${sc}.${spec.fn} TO ${roleIdent}`);

    const privileges = await rolePrivileges(client, role);
    const expected = expectedIntakeRolePrivileges(spec, database, schema);
    if (JSON.stringify(privileges) !== JSON.stringify(expected)) {
      throw new IntakeRoleError(
        `${role} ends with ${JSON.stringify(privileges)}, expected ${JSON.stringify(expected)}`,
      );
    }
    const sessionDefaults = await setRoleSessionBounds(client, role, session);
    await client.query('COMMIT');
    return {
      role,
      kind: spec.kind,
      database,
      schema,
      created: existing === undefined,
      privileges,
      sessionDefaults,
    };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
}
