// The worker's own PostgreSQL role (`npm run db:worker-role`): it may log in, connect to the
// database, see the schema, call the decision function(s) and read _prisma_migrations (the
// readiness check), and nothing else. The decision functions are SECURITY DEFINER (see the
// least-privilege migration), so a transfer still writes wallets, transfers and the ledger, but
// only through the checks inside them: a bug or a stolen worker credential cannot rewrite a
// balance or an entry directly. Its sessions' bounds (DB_*_TIMEOUT_MS, TimeZone=UTC) become its
// defaults in the database, which is how they reach it behind PgBouncer (session-bounds.ts).
import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import pg from 'pg';
import { databaseName } from '../config/config.ts';
import { WorkerRoleError } from '../errors.ts';
import { HOLD_SWEEP_FUNCTION, PAYMENT_DECISION_FUNCTION } from '../ledger/apply-payments.ts';
import {
  DECISION_FUNCTION,
  FEED_SEQUENCE_FUNCTION,
  GIVE_UP_FUNCTION,
  GIVE_UP_SEND_FUNCTION,
} from '../ledger/apply-transfer.ts';
import { INVALID_REQUEST_FUNCTION } from '../ledger/undecidable-request.ts';
import { LOCK_FUNCTIONS } from '../lock/lock-epochs.ts';
import { type SessionBoundsConfig, type SessionSetting, setRoleSessionBounds } from './session-bounds.ts';

/**
 * Every function the worker role may execute, with its full signature as PostgreSQL prints it
 * (`regprocedure`). A new decision function is added here and in its migration (SECURITY
 * DEFINER, fixed search_path, EXECUTE revoked from PUBLIC); a test checks the two agree.
 */
export const DECISION_FUNCTIONS: readonly string[] = Object.freeze([
  DECISION_FUNCTION,
  GIVE_UP_FUNCTION,
  GIVE_UP_SEND_FUNCTION,
  FEED_SEQUENCE_FUNCTION,
  PAYMENT_DECISION_FUNCTION,
  HOLD_SWEEP_FUNCTION,
  INVALID_REQUEST_FUNCTION,
  ...LOCK_FUNCTIONS,
]);

/** Tables the worker role may read (SELECT only). */
export const WORKER_READABLE_TABLES: readonly string[] = Object.freeze(['_prisma_migrations']);

/** A role name we create: lower case, digits and underscores, as PostgreSQL folds unquoted names. */
export const ROLE_NAME_PATTERN = /^[a-z_][a-z0-9_]{0,62}$/;

/** PostgreSQL's default iteration count for SCRAM-SHA-256 verifiers. */
export const SCRAM_ITERATIONS = 4096;
const SCRAM_SALT_BYTES = 16;

/** Serialises concurrent runs (two migration jobs at once): CREATE ROLE and GRANT race otherwise. */
export const WORKER_ROLE_ADVISORY_LOCK_KEY = 72707370;

export interface WorkerRoleResult {
  role: string;
  database: string;
  schema: string;
  created: boolean;
  /** What the role may do afterwards, read back from the catalogs (see rolePrivileges). */
  privileges: string[];
  /** Its session defaults in the database (ALTER ROLE … IN DATABASE … SET), from the configuration. */
  sessionDefaults: Record<SessionSetting, string>;
}

/**
 * The SCRAM-SHA-256 verifier PostgreSQL stores for a password (RFC 5802/7677, PostgreSQL's
 * format). Sending the verifier instead of the password keeps the password itself out of the
 * server's statement log, as psql's \password does. Assumes SASLprep leaves the password
 * unchanged, which holds for printable ASCII (see loadWorkerDbPassword).
 */
export function scramSha256Verifier(
  password: string,
  salt: Buffer = randomBytes(SCRAM_SALT_BYTES),
  iterations = SCRAM_ITERATIONS,
): string {
  const salted = pbkdf2Sync(Buffer.from(password, 'utf8'), salt, iterations, 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const storedKey = createHash('sha256').update(clientKey).digest();
  const serverKey = createHmac('sha256', salted).update('Server Key').digest();
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`;
}

/** The same database URL, logging in as `role` with `password`. */
export function roleUrl(databaseUrl: string, role: string, password: string): string {
  const u = new URL(databaseUrl);
  u.username = encodeURIComponent(role);
  u.password = encodeURIComponent(password);
  return u.toString();
}

/**
 * Every privilege granted to `role` in the connected database and on the database itself, one
 * line each (`TABLE public._prisma_migrations SELECT`), sorted. Privileges PUBLIC holds are
 * not listed: the least-privilege migration removes the ones that matter.
 */
export async function rolePrivileges(client: pg.ClientBase, role: string): Promise<string[]> {
  const { rows } = await client.query<{ line: string }>(
    `
    WITH r AS (SELECT oid FROM pg_roles WHERE rolname = $1)
    SELECT 'DATABASE ' || quote_ident(d.datname) || ' ' || a.privilege_type AS line
      FROM pg_database d, aclexplode(d.datacl) a, r
     WHERE d.datname = current_database() AND a.grantee = r.oid
    UNION ALL
    SELECT 'SCHEMA ' || quote_ident(n.nspname) || ' ' || a.privilege_type
      FROM pg_namespace n, aclexplode(n.nspacl) a, r WHERE a.grantee = r.oid
    UNION ALL
    SELECT CASE c.relkind WHEN 'S' THEN 'SEQUENCE ' ELSE 'TABLE ' END
           || quote_ident(n.nspname) || '.' || quote_ident(c.relname) || ' ' || a.privilege_type
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a, r
     WHERE a.grantee = r.oid
    UNION ALL
    SELECT 'COLUMN ' || quote_ident(n.nspname) || '.' || quote_ident(c.relname) || '.' || quote_ident(t.attname)
           || ' ' || a.privilege_type
      FROM pg_attribute t JOIN pg_class c ON c.oid = t.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace,
           aclexplode(t.attacl) a, r
     WHERE a.grantee = r.oid
    UNION ALL
    SELECT 'FUNCTION ' || quote_ident(n.nspname) || '.' || p.proname
           || '(' || replace(oidvectortypes(p.proargtypes), ', ', ',') || ') ' || a.privilege_type
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace, aclexplode(p.proacl) a, r
     WHERE a.grantee = r.oid
    UNION ALL
    SELECT 'MEMBER OF ' || quote_ident(g.rolname)
      FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid, r WHERE m.member = r.oid
    ORDER BY 1`,
    [role],
  );
  return rows.map((r) => r.line);
}

/**
 * What a least-privilege login role of ours may do (the worker's, and the intake's producer and
 * read roles, src/db/intake-role-grants.ts): the functions it may execute and the tables it may
 * read, besides CONNECT and USAGE on the schema. One mechanism makes and checks them all.
 */
export interface LoginRoleSpec {
  /** Named in refusals: `the <kind> role must …`. */
  readonly kind: string;
  /** How a missing function is named in the refusal (`decision function`, `function`). */
  readonly functionLabel: string;
  /** `regprocedure` signatures it may execute. */
  readonly functions: readonly string[];
  /** Tables it may read (SELECT only). */
  readonly readableTables: readonly string[];
  /** The error its refusals throw, so each command reports its own kind in one line. */
  readonly error: new (
    message: string,
  ) => WorkerRoleError;
}

export const WORKER_ROLE_SPEC: LoginRoleSpec = Object.freeze({
  kind: 'worker',
  functionLabel: 'decision function',
  functions: DECISION_FUNCTIONS,
  readableTables: WORKER_READABLE_TABLES,
  error: WorkerRoleError,
});

/** The privileges a role of `spec` must end with, in rolePrivileges' form. */
export function expectedRolePrivileges(spec: LoginRoleSpec, database: string, schema: string): string[] {
  const ident = (s: string) => (/^[a-z_][a-z0-9_]*$/.test(s) ? s : `"${s.replace(/"/g, '""')}"`);
  return [
    `DATABASE ${ident(database)} CONNECT`,
    `SCHEMA ${ident(schema)} USAGE`,
    ...spec.functions.map((f) => `FUNCTION ${ident(schema)}.${f} EXECUTE`),
    ...spec.readableTables.map((t) => `TABLE ${ident(schema)}.${ident(t)} SELECT`),
  ].sort();
}

/** The privileges the worker role must end with, in rolePrivileges' form. */
export function expectedWorkerPrivileges(database: string, schema: string): string[] {
  return expectedRolePrivileges(WORKER_ROLE_SPEC, database, schema);
}

/**
 * Creates the login role, or brings an existing one back to exactly the worker's privileges:
 * everything it held on the database, its schemas, tables, sequences and functions is revoked,
 * then CONNECT, USAGE, EXECUTE on DECISION_FUNCTIONS and SELECT on WORKER_READABLE_TABLES are
 * granted. Refuses a role that is the caller, a superuser, able to create roles or databases,
 * a member of another role, or the owner of anything here: such a role can never be "nothing
 * else". `ownerUrl` is the migrating owner's URL. `session`'s bounds become the role's defaults
 * in this database.
 */
export function ensureWorkerRole(
  ownerUrl: string,
  role: string,
  password: string,
  session: SessionBoundsConfig,
): Promise<WorkerRoleResult> {
  return ensureLoginRole(WORKER_ROLE_SPEC, ownerUrl, role, password, session);
}

/** ensureWorkerRole() for any LoginRoleSpec: the same steps, refusals and read-back. */
export async function ensureLoginRole(
  spec: LoginRoleSpec,
  ownerUrl: string,
  role: string,
  password: string,
  session: SessionBoundsConfig,
): Promise<WorkerRoleResult> {
  const Refusal = spec.error;
  if (!ROLE_NAME_PATTERN.test(role)) {
    throw new Refusal(
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
    if (where === undefined) throw new Refusal('cannot read the current schema');
    const { schema } = where;
    if (role === where.me)
      throw new Refusal(`${role} is the role running this command (the owner); choose another name`);

    for (const fn of spec.functions) {
      const found = await client.query('SELECT to_regprocedure($1) IS NOT NULL AS ok', [`${schema}.${fn}`]);
      if (found.rows[0]?.ok !== true)
        throw new Refusal(`${spec.functionLabel} ${fn} is missing in schema ${schema}: run npm run db:migrate first`);
    }
    const {
      rows: [existing],
    } = await client.query<{
      rolsuper: boolean;
      rolcreaterole: boolean;
      rolcreatedb: boolean;
      rolreplication: boolean;
      rolbypassrls: boolean;
    }>('SELECT rolsuper, rolcreaterole, rolcreatedb, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = $1', [
      role,
    ]);
    if (existing !== undefined) {
      const powers = Object.entries(existing)
        .filter(([, on]) => on)
        .map(([k]) => k.replace(/^rol/, ''));
      if (powers.length > 0)
        throw new Refusal(`${role} already exists with ${powers.join(', ')}; the ${spec.kind} role must have none`);
      const member = await client.query<{ g: string }>(
        'SELECT g.rolname AS g FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = $1',
        [role],
      );
      if (member.rows.length > 0) {
        throw new Refusal(
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
        throw new Refusal(`${role} owns objects in ${database}; the ${spec.kind} role must own nothing`);
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
    for (const fn of spec.functions) await client.query(`GRANT EXECUTE ON FUNCTION ${sc}.${fn} TO ${roleIdent}`);
    for (const table of spec.readableTables) {
      await client.query(`GRANT SELECT ON TABLE ${sc}.${client.escapeIdentifier(table)} TO ${roleIdent}`);
    }

    const privileges = await rolePrivileges(client, role);
    const expected = expectedRolePrivileges(spec, database, schema);
    if (JSON.stringify(privileges) !== JSON.stringify(expected)) {
      throw new Refusal(`${role} ends with ${JSON.stringify(privileges)}, expected ${JSON.stringify(expected)}`);
    }
    const sessionDefaults = await setRoleSessionBounds(client, role, session);
    await client.query('COMMIT');
    return { role, database, schema, created: existing === undefined, privileges, sessionDefaults };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Drops a worker role (tests, the chaos harness on a borrowed server): its grants in the
 * database of `ownerUrl` (when that still exists) and on shared objects first, then the role.
 */
export async function dropWorkerRole(ownerUrl: string, role: string): Promise<void> {
  if (!ROLE_NAME_PATTERN.test(role)) throw new WorkerRoleError(`not a worker role name: ${JSON.stringify(role)}`);
  const maintenance = new URL(ownerUrl);
  maintenance.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: maintenance.toString(), application_name: 'fenced-transfers-admin' });
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
    if (exists.rowCount === 0) return;
    const dbExists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [databaseName(ownerUrl)]);
    if (dbExists.rowCount !== 0) {
      const client = new pg.Client({ connectionString: ownerUrl, application_name: 'fenced-transfers-admin' });
      client.on('error', () => undefined);
      await client.connect();
      try {
        await client.query(`DROP OWNED BY ${client.escapeIdentifier(role)}`);
      } finally {
        await client.end().catch(() => undefined);
      }
    }
    const r = admin.escapeIdentifier(role);
    await admin.query(`DROP OWNED BY ${r}`);
    await admin.query(`DROP ROLE ${r}`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}
