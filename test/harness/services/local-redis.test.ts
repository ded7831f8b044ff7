// A private redis-server's start, when the port chosen for it is taken before it binds it (here
// by a listener of the test's that accepts and never answers, as a fault proxy landing on that
// port would): whatever answers on the port is not taken for the server, the server's exit at
// start is seen at once, and it comes up on another port. On a given port there is no other to
// try: the start fails at once, naming the port.
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../../harness/services/free-port.ts';
import { LocalRedis, REDIS_START_ATTEMPTS_MAX } from '../../../harness/services/local-redis.ts';

/** Far above an exit at start (milliseconds), far below REDIS_START_TIMEOUT_MS. */
const NOTICED_WITHIN_MS = 5_000;

const root = mkdtempSync(join(tmpdir(), 'local-redis-test-'));
const servers: LocalRedis[] = [];
const blockers: Server[] = [];

afterAll(async () => {
  for (const s of servers) await s.stop().catch(() => undefined);
  for (const b of blockers) b.close();
  rmSync(root, { recursive: true, force: true });
});

/** A loopback listener that accepts connections and never answers; resolves with its port. */
async function occupiedPort(): Promise<number> {
  const blocker = createServer(() => undefined);
  blockers.push(blocker);
  blocker.listen(0, '127.0.0.1');
  await once(blocker, 'listening');
  const address = blocker.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describe('LocalRedis.start', () => {
  it('comes up on another port when the chosen one is taken before redis-server binds it', async () => {
    const taken = await occupiedPort();
    const chosen: number[] = [];
    const server = await LocalRedis.start({
      dir: join(root, 'moved'),
      choosePort: async () => {
        const port = chosen.length === 0 ? taken : await freePort();
        chosen.push(port);
        return port;
      },
    });
    servers.push(server);
    expect(server.port, 'the port it serves on').not.toBe(taken);
    expect(chosen).toEqual([taken, server.port]);
    const client = server.client();
    try {
      const info = String(await client.info('server'));
      // The server answering is this one, the process it started.
      expect(/process_id:(\d+)/.exec(info)?.[1]).toBe(String(server.pid));
    } finally {
      client.disconnect();
    }
  });

  it('on a given port that is taken, fails at once naming it', async () => {
    const taken = await occupiedPort();
    const t0 = performance.now();
    await expect(LocalRedis.start({ dir: join(root, 'given'), port: taken })).rejects.toThrow(
      new RegExp(`exited at start: its port ${taken} is in use \\(Address already in use\\)`),
    );
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });

  it(`gives up after ${REDIS_START_ATTEMPTS_MAX} taken ports, naming them`, async () => {
    const taken = await occupiedPort();
    const t0 = performance.now();
    await expect(LocalRedis.start({ dir: join(root, 'never'), choosePort: async () => taken })).rejects.toThrow(
      `tried ${Array.from({ length: REDIS_START_ATTEMPTS_MAX }, () => taken).join(', ')}`,
    );
    expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
  });
});
