// A private PgBouncer's start, when the port chosen for it is taken before it binds it (here by
// a listener of the test's that accepts and never answers): that listener is not taken for
// PgBouncer, PgBouncer's exit at start ("Address already in use") is seen at once, and it comes
// up on another port, in front of the configured PostgreSQL server.
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../harness/services/free-port.ts';
import { LocalPgBouncer } from '../../../harness/services/local-pgbouncer.ts';
import { loadConfig } from '../../../src/config/config.ts';

const QUERY_TIMEOUT_MS = 5_000;

let bouncer: LocalPgBouncer | null = null;
let blocker: Server | null = null;

afterAll(async () => {
  await bouncer?.stop();
  blocker?.close();
});

describe('LocalPgBouncer.start', () => {
  it('comes up on another port when the chosen one is taken before PgBouncer binds it', async () => {
    blocker = createServer(() => undefined);
    blocker.listen(0, '127.0.0.1');
    await once(blocker, 'listening');
    const taken = (blocker.address() as { port: number }).port;
    const server = new URL(loadConfig().databaseUrl);
    const chosen: number[] = [];
    bouncer = await LocalPgBouncer.start({
      serverHost: server.hostname,
      serverPort: server.port === '' ? 5432 : Number(server.port),
      authUser: decodeURIComponent(server.username) || 'postgres',
      choosePort: async () => {
        const port = chosen.length === 0 ? taken : await freePort();
        chosen.push(port);
        return port;
      },
    });
    expect(bouncer.port, 'the port it serves on').not.toBe(taken);
    expect(chosen).toEqual([taken, bouncer.port]);
    const url = new URL(bouncer.urlFor(loadConfig().databaseUrl));
    url.pathname = '/postgres';
    const client = new pg.Client({ connectionString: url.toString(), query_timeout: QUERY_TIMEOUT_MS });
    await client.connect();
    try {
      expect((await client.query('SELECT 1 AS one')).rows[0]?.one).toBe(1);
    } finally {
      await client.end();
    }
  });
});
