// The test files' databases are copies of one migrated template (test/support/template-db.ts).
// A copy must be what migrate() builds: the same relations, columns, functions, triggers, grants,
// recorded migrations, and the same ACL on the database itself, which a copy does not inherit and
// copyTemplate() grants again. The control copies without that step and is told apart.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig, withDatabase } from '../../src/config/config.ts';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { dropDatabase } from '../../src/db/database-admin.ts';
import { migrate } from '../../src/db/migrations.ts';
import { copyTemplate } from '../support/template-db.ts';
import { uniqueName } from '../support/test-db.ts';

const FINGERPRINT = `
  SELECT json_build_object(
    'database_acl', (SELECT json_agg(x ORDER BY x) FROM (
        SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END || ':' || a.privilege_type AS x
          FROM pg_database d, aclexplode(d.datacl) a WHERE d.datname = current_database()) acl),
    'database_settings', (SELECT json_agg(s.setconfig) FROM pg_db_role_setting s
        JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()),
    'relations', (SELECT json_agg(c.relname || ':' || c.relkind::text || ':' || coalesce(c.relacl::text, '') ORDER BY c.relname)
        FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'),
    'columns', (SELECT json_agg(c.relname || '.' || a.attname || ':' || format_type(a.atttypid, a.atttypmod)
          || ':' || a.attnotnull ORDER BY c.relname, a.attnum)
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped),
    'functions', (SELECT json_agg(p.oid::regprocedure::text || ':' || md5(p.prosrc) || ':' || coalesce(p.proacl::text, '')
          || ':' || coalesce(p.proconfig::text, '') ORDER BY p.oid::regprocedure::text)
        FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'),
    'triggers', (SELECT json_agg(t.tgname || ':' || t.tgrelid::regclass::text ORDER BY t.tgname)
        FROM pg_trigger t WHERE NOT t.tgisinternal),
    'migrations', (SELECT json_agg(migration_name || ':' || checksum ORDER BY migration_name) FROM _prisma_migrations)
  ) AS fingerprint`;

async function fingerprint(url: string): Promise<Record<string, unknown>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ fingerprint: Record<string, unknown> }>(FINGERPRINT)).rows[0]?.fingerprint ?? {};
  } finally {
    await client.end();
  }
}

describe('a test database copied from the template', () => {
  const server = loadConfig().databaseUrl;
  const names = {
    migrated: uniqueName('ft_tmpl_migrated'),
    copied: uniqueName('ft_tmpl_copied'),
    bare: uniqueName('ft_tmpl_bare'),
  };
  const url = (name: string) => withDatabase(server, name);
  const template = inject('templateDatabase');

  beforeAll(async () => {
    if (template === null) throw new Error('the global setup provided no template');
    await migrate(url(names.migrated), MIGRATIONS_DIR);
    await copyTemplate(url(names.copied), template.name);
  });
  afterAll(async () => {
    for (const name of Object.values(names)) await dropDatabase(url(name));
  });

  it('is what migrate() builds, down to the grants on the database', async () => {
    const migrated = await fingerprint(url(names.migrated));
    expect(migrated.database_acl, 'the least-privilege migration revokes TEMPORARY from PUBLIC').not.toBeNull();
    expect((migrated.functions as string[]).length).toBeGreaterThan(10);
    expect(await fingerprint(url(names.copied))).toEqual(migrated);
  });

  it('control: a bare CREATE DATABASE … TEMPLATE misses the ACL, and the comparison sees it', async () => {
    const admin = new pg.Client({ connectionString: url('postgres') });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE "${names.bare}" TEMPLATE "${template?.name}"`);
    } finally {
      await admin.end();
    }
    const bare = await fingerprint(url(names.bare));
    const migrated = await fingerprint(url(names.migrated));
    expect(bare.database_acl).toBeNull();
    expect({ ...bare, database_acl: migrated.database_acl }).toEqual(migrated);
  });
});
