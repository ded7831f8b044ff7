// docs/reference/roles.md: every database role of the service and every right it holds, read
// from PostgreSQL's catalogs, never written by hand. A scratch database is made on the configured
// server and migrated, each login role is created there by its own command's code (the worker's,
// the producer's, the read and the relay role), and the catalogs are asked, for each role and for
// PUBLIC (what every role holds), about the role's attributes and memberships, its session
// defaults in the database, the database and schema rights, every table (and column), sequence
// and function of the schema. The scratch database and roles are dropped afterwards. A test reads
// the catalogs again and compares with the committed page (test/harness/docs/roles-doc.test.ts),
// so a grant added in a migration or a grants module without `npm run docs` fails there.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { ensureIntakeRole, INTAKE_ROLES } from '../../src/db/intake-role-grants.ts';
import { migrate } from '../../src/db/migrations.ts';
import { ensureRelayRole } from '../../src/db/relay-role-grants.ts';
import { SESSION_SETTINGS } from '../../src/db/session-bounds.ts';
import { dropWorkerRole, ensureWorkerRole } from '../../src/db/worker-role-grants.ts';

export const ROLES_DOC_PATH = 'docs/reference/roles.md';

/** A column of the table: a role's kind as the docs name it, and its name in the catalogs. */
export interface RoleColumn {
  readonly label: string;
  /** The role's name, or `public` for the PUBLIC pseudo-role. */
  readonly name: string;
}

/** One right (a row): what it is on, and each column's cell, in the columns' order. */
export interface RightRow {
  readonly object: string;
  readonly cells: readonly string[];
}

/** The login roles, in the order of the table's columns, each made by its command's code. */
export const ROLE_KINDS = [
  { label: 'worker', command: 'npm run db:worker-role' },
  { label: 'producer', command: 'npm run db:producer-role' },
  { label: 'read', command: 'npm run db:read-role' },
  { label: 'relay', command: 'npm run db:relay-role' },
] as const;
export type RoleKind = (typeof ROLE_KINDS)[number]['label'];

const TABLE_PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER'] as const;
const COLUMN_PRIVILEGES = ['SELECT', 'INSERT', 'UPDATE', 'REFERENCES'] as const;
const SEQUENCE_PRIVILEGES = ['USAGE', 'SELECT', 'UPDATE'] as const;
const NONE = '—';
const PASSWORD_BYTES = 24;

/** Runs `use` with a migrated scratch database on the server of `serverUrl` and one role of each kind in it. */
export async function withScratchRoles<T>(
  serverUrl: string,
  use: (scratch: { url: string; roles: Readonly<Record<RoleKind, string>> }) => Promise<T>,
): Promise<T> {
  const tag = `${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = withDatabase(serverUrl, `docs_roles_${tag}`);
  const roles: Record<RoleKind, string> = {
    worker: `docs_worker_${tag}`,
    producer: `docs_producer_${tag}`,
    read: `docs_read_${tag}`,
    relay: `docs_relay_${tag}`,
  };
  try {
    await migrate(url, MIGRATIONS_DIR);
    // The defaults, whatever this shell's environment says: the page shows what the commands do.
    const session = loadConfig({ DATABASE_URL: url });
    const password = () => randomBytes(PASSWORD_BYTES).toString('hex');
    await ensureWorkerRole(url, roles.worker, password(), session);
    await ensureIntakeRole(INTAKE_ROLES.producer, url, roles.producer, password(), session);
    await ensureIntakeRole(INTAKE_ROLES.read, url, roles.read, password(), session);
    await ensureRelayRole(url, roles.relay, password(), session);
    return await use({ url, roles });
  } finally {
    await dropDatabase(url).catch(() => undefined);
    for (const role of Object.values(roles)) await dropWorkerRole(url, role).catch(() => undefined);
  }
}

/** The columns of the page: each login role, then PUBLIC. */
export function roleColumns(roles: Readonly<Record<RoleKind, string>>): RoleColumn[] {
  return [...ROLE_KINDS.map((k) => ({ label: k.label, name: roles[k.label] })), { label: 'PUBLIC', name: 'public' }];
}

/** Every right of every column, read from the catalogs of the database `client` is connected to. */
export async function readRoleRights(client: pg.ClientBase, columns: readonly RoleColumn[]): Promise<RightRow[]> {
  const names = columns.map((c) => c.name);
  const rows: RightRow[] = [];
  const yesNo = (on: boolean | null) => (on === null ? NONE : on ? 'yes' : 'no');

  // The role itself: attributes, memberships, its defaults in this database (PUBLIC has none).
  const attributes = await client.query<{
    name: string;
    rolcanlogin: boolean;
    rolsuper: boolean;
    rolcreaterole: boolean;
    rolcreatedb: boolean;
    rolreplication: boolean;
    rolbypassrls: boolean;
    rolinherit: boolean;
    rolconnlimit: number;
    member_of: string[];
    settings: string[] | null;
  }>(
    `SELECT r.rolname AS name, r.rolcanlogin, r.rolsuper, r.rolcreaterole, r.rolcreatedb, r.rolreplication,
            r.rolbypassrls, r.rolinherit, r.rolconnlimit,
            ARRAY(SELECT g.rolname::text FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
                   WHERE m.member = r.oid ORDER BY 1) AS member_of,
            (SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
              WHERE s.setrole = r.oid AND d.datname = current_database()) AS settings
       FROM pg_roles r WHERE r.rolname = ANY($1::text[])`,
    [names],
  );
  const byName = new Map(attributes.rows.map((r) => [r.name, r]));
  const attribute = (object: string, cell: (r: (typeof attributes.rows)[number]) => string) =>
    rows.push({
      object,
      cells: names.map((n) => {
        const r = byName.get(n);
        return r === undefined ? NONE : cell(r);
      }),
    });
  attribute('role: LOGIN', (r) => yesNo(r.rolcanlogin));
  attribute('role: SUPERUSER', (r) => yesNo(r.rolsuper));
  attribute('role: CREATEROLE', (r) => yesNo(r.rolcreaterole));
  attribute('role: CREATEDB', (r) => yesNo(r.rolcreatedb));
  attribute('role: REPLICATION', (r) => yesNo(r.rolreplication));
  attribute('role: BYPASSRLS', (r) => yesNo(r.rolbypassrls));
  attribute('role: INHERIT', (r) => yesNo(r.rolinherit));
  attribute('role: CONNECTION LIMIT', (r) => (r.rolconnlimit < 0 ? 'none' : String(r.rolconnlimit)));
  attribute('role: member of', (r) => (r.member_of.length === 0 ? NONE : r.member_of.join(', ')));
  for (const setting of SESSION_SETTINGS) {
    attribute(`session default in the database: ${setting}`, (r) => {
      const found = (r.settings ?? []).find((s) => s.startsWith(`${setting}=`));
      return found === undefined ? NONE : `\`${found.slice(setting.length + 1)}\``;
    });
  }

  const held = async (object: string, sql: string, privileges: readonly string[], params: unknown[] = []) => {
    const cells: string[] = [];
    for (const name of names) {
      const got: string[] = [];
      for (const p of privileges) {
        const { rows: r } = await client.query<{ on: boolean }>(sql, [name, p, ...params]);
        if (r[0]?.on === true) got.push(p);
      }
      cells.push(got.length === 0 ? NONE : got.join(', '));
    }
    rows.push({ object, cells });
  };
  await held('the database', 'SELECT has_database_privilege($1, current_database(), $2) AS on', [
    'CONNECT',
    'CREATE',
    'TEMPORARY',
  ]);
  const schema = (await client.query<{ s: string }>('SELECT current_schema() AS s')).rows[0]?.s ?? 'public';
  await held(`schema ${schema}`, 'SELECT has_schema_privilege($1, $3, $2) AS on', ['USAGE', 'CREATE'], [schema]);

  const relations = await client.query<{ oid: number; name: string; kind: string }>(
    `SELECT c.oid::integer AS oid, c.relname AS name, c.relkind::text AS kind
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
      ORDER BY c.relkind = 'S', c.relname`,
  );
  for (const rel of relations.rows) {
    if (rel.kind === 'S') {
      await held(`sequence ${rel.name}`, 'SELECT has_sequence_privilege($1, $3::oid, $2) AS on', SEQUENCE_PRIVILEGES, [
        rel.oid,
      ]);
      continue;
    }
    const cells: string[] = [];
    for (const name of names) {
      const { rows: r } = await client.query<{ table_rights: string[]; column_rights: string[] }>(
        `SELECT ARRAY(SELECT p FROM unnest($3::text[]) WITH ORDINALITY AS t(p, i)
                       WHERE has_table_privilege($1, $2::oid, p) ORDER BY i) AS table_rights,
                ARRAY(SELECT p || ' (' || string_agg(a.attname, ', ' ORDER BY a.attnum) || ')'
                        FROM unnest($4::text[]) WITH ORDINALITY AS t(p, i)
                        JOIN pg_attribute a ON a.attrelid = $2::oid AND a.attnum > 0 AND NOT a.attisdropped
                       WHERE has_column_privilege($1, $2::oid, a.attnum, p) AND NOT has_table_privilege($1, $2::oid, p)
                       GROUP BY p, i ORDER BY i) AS column_rights`,
        [name, rel.oid, TABLE_PRIVILEGES, COLUMN_PRIVILEGES],
      );
      const got = [...(r[0]?.table_rights ?? []), ...(r[0]?.column_rights ?? [])];
      cells.push(got.length === 0 ? NONE : got.join(', '));
    }
    rows.push({ object: `${rel.kind === 'v' || rel.kind === 'm' ? 'view' : 'table'} ${rel.name}`, cells });
  }

  const functions = await client.query<{ oid: number; signature: string; definer: boolean }>(
    `SELECT p.oid::integer AS oid, p.proname || '(' || replace(oidvectortypes(p.proargtypes), ', ', ',') || ')' AS signature,
            p.prosecdef AS definer
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
      WHERE n.nspname = current_schema()
      ORDER BY 2`,
  );
  for (const fn of functions.rows) {
    await held(
      `function ${fn.signature}${fn.definer ? ' (runs as its owner)' : ''}`,
      'SELECT has_function_privilege($1, $3::oid, $2) AS on',
      ['EXECUTE'],
      [fn.oid],
    );
  }
  return rows;
}

const escapeCell = (s: string) => s.replace(/\|/g, '\\|');

/** The page's body, from the rights read. */
export function renderRolesDoc(columns: readonly RoleColumn[], rights: readonly RightRow[]): string {
  const commands = ROLE_KINDS.map((k) => `- ${k.label}: \`${k.command}\``).join('\n');
  const header = `| Right on | ${columns.map((c) => c.label).join(' | ')} |`;
  const rule = `|${' --- |'.repeat(columns.length + 1)}`;
  const body = rights.map((r) => `| ${escapeCell(r.object)} | ${r.cells.map(escapeCell).join(' | ')} |`);
  return `# Database roles and their rights

Every login role the service's processes use, and everything each may do in the database, as
PostgreSQL's catalogs say after \`npm run db:migrate\` and each role's command:

${commands}

The PUBLIC column is what every role holds without a grant of its own. \`npm run docs\` reads
this from a scratch database (\`harness/docs/roles-doc.ts\`) and a test compares it with the
catalogs again, so a right a migration or a command grants cannot go unlisted here.

The owner, the role that runs \`npm run db:migrate\` and the role commands, owns every table and
function and may do anything; no long-running process needs it (the relay warns at start when it
logs in as a role that owns tables). A function marked *runs as its owner* is SECURITY DEFINER with
its search_path pinned: a role that may execute it reaches the tables only through its checks.
Why each role holds what it holds: [security.md](../operating/security.md).

A cell lists the rights held (\`${NONE}\`: none); \`has_*_privilege()\` answers each, so a right
held through PUBLIC shows in every column.

${header}
${rule}
${body.join('\n')}
`;
}

/** The page as the catalogs of a fresh scratch database on the configured server give it. */
export async function renderRolesDocFromCatalogs(serverUrl = loadConfig().databaseUrl): Promise<string> {
  return withScratchRoles(serverUrl, async ({ url, roles }) => {
    const client = new pg.Client({ connectionString: url, application_name: 'fenced-transfers-docs' });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const columns = roleColumns(roles);
      return renderRolesDoc(columns, await readRoleRights(client, columns));
    } finally {
      await client.end().catch(() => undefined);
    }
  });
}
