// A private PostgreSQL's start, when the port chosen for it is taken before the server binds it
// (here by a listener of the test's): pg_ctl sees the postmaster exit at once, server.log says
// "Address already in use", and the server comes up on another port, with the cluster initdb
// made for the first attempt.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../harness/services/free-port.ts';
import { LocalPostgres } from '../../../harness/services/local-postgres.ts';

/** initdb, a failed start and a second one, on a loaded machine. */
const TEST_TIMEOUT_MS = 90_000;

// The cluster folder itself: as root LocalPostgres hands it to the postgres user, which must
// also get through every folder above it (a mkdtemp folder is root-only).
const dir = mkdtempSync(join(tmpdir(), 'local-postgres-test-'));
let server: LocalPostgres | null = null;
let blocker: Server | null = null;

afterAll(async () => {
  await server?.stop('immediate');
  blocker?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('LocalPostgres.start', () => {
  it(
    'comes up on another port when the chosen one is taken before the server binds it',
    async () => {
      blocker = createServer(() => undefined);
      blocker.listen(0, '127.0.0.1');
      await once(blocker, 'listening');
      const taken = (blocker.address() as { port: number }).port;
      const chosen: number[] = [];
      server = await LocalPostgres.start({
        dir,
        fsync: false,
        choosePort: async () => {
          const port = chosen.length === 0 ? taken : await freePort();
          chosen.push(port);
          return port;
        },
      });
      expect(server.port, 'the port it serves on').not.toBe(taken);
      expect(chosen).toEqual([taken, server.port]);
      const client = new pg.Client({ connectionString: server.url });
      await client.connect();
      try {
        expect((await client.query('SELECT inet_server_port() AS port')).rows[0]?.port).toBe(server.port);
      } finally {
        await client.end();
      }
    },
    TEST_TIMEOUT_MS,
  );
});
