// The migrated template the test files' databases are copied from (test/global-setup.ts makes
// one per run and drops it afterwards), and the copy itself. A copy is CREATE DATABASE …
// TEMPLATE: the server copies the files of a database that every migration has already run on,
// `_prisma_migrations` included, so the copy is what migrate() would have built.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { databaseName, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';

export interface TemplateDatabase {
  name: string;
  drop(): Promise<void>;
}

async function asAdmin<T>(serverUrl: string, use: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.end();
  }
}

/** Migrates a database of a fresh name on the server of `databaseUrl` and closes it to sessions. */
export async function migratedTemplate(databaseUrl: string): Promise<TemplateDatabase> {
  const name = `ft_template_${process.pid}_${randomBytes(4).toString('hex')}`;
  const url = withDatabase(databaseUrl, name);
  try {
    await migrate(url, MIGRATIONS_DIR);
    // No session may open on it again: a copy would fail while one is open.
    await asAdmin(databaseUrl, (admin) => admin.query(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS false`));
  } catch (err) {
    await dropDatabase(url).catch(() => undefined);
    throw err;
  }
  return { name, drop: () => dropDatabase(url) };
}

/**
 * Creates the database of `databaseUrl` as a copy of `template` (on the same server). The copy
 * has the template's files, not its row of pg_database: what a migration granted or revoked ON
 * DATABASE (the least-privilege migration revokes TEMPORARY from PUBLIC) is granted again here,
 * privilege by privilege, from the template's ACL.
 */
export async function copyTemplate(databaseUrl: string, template: string): Promise<void> {
  const name = databaseName(databaseUrl);
  await asAdmin(databaseUrl, async (admin) => {
    // databaseName() allows [A-Za-z0-9_-] only; identifiers cannot be bound as parameters.
    await admin.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
    const acl = await admin.query<{ grantee: string; privilege: string }>(
      `SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END AS grantee, a.privilege_type AS privilege
         FROM pg_database d, aclexplode(d.datacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
        WHERE d.datname = $1`,
      [template],
    );
    // A NULL ACL (no row) is the default one, which the copy has already.
    if (acl.rows.length === 0) return;
    await admin.query(`REVOKE ALL ON DATABASE "${name}" FROM PUBLIC`);
    for (const { grantee, privilege } of acl.rows) {
      await admin.query(`GRANT ${privilege} ON DATABASE "${name}" TO ${grantee}`);
    }
  });
}
