// Creates and drops whole databases through the server's `postgres` maintenance database:
// the migration runner creates its target, the demo, the chaos harness and the tests drop theirs.
import pg from 'pg';
import { databaseName, withDatabase } from '../config/config.ts';

async function withAdmin<T>(databaseUrl: string, use: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: withDatabase(databaseUrl, 'postgres') });
  // A session the server ends fails the query in flight, which the caller sees; the client then
  // also emits 'error', which must not crash the process.
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    return await use(admin);
  } finally {
    await admin.end();
  }
}

/** Creates the database named in the URL when missing; true when this call created it. */
export async function ensureDatabase(databaseUrl: string): Promise<boolean> {
  const name = databaseName(databaseUrl);
  return withAdmin(databaseUrl, async (admin) => {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount !== 0) return false;
    try {
      // The name was validated to [A-Za-z0-9_-]; identifiers cannot be bound as parameters.
      await admin.query(`CREATE DATABASE "${name}"`);
      return true;
    } catch (err) {
      // Another runner created it between our check and our CREATE (several pods at once).
      const code = (err as { code?: string }).code;
      if (code === '42P04' || code === '23505') return false;
      throw err;
    }
  });
}

/** Drops the database named in the URL, if it exists, ending its sessions first. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const name = databaseName(databaseUrl);
  await withAdmin(databaseUrl, (admin) => admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
}
