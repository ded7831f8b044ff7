// `npm run services` on a loopback Redis URL whose port something else holds (here a listener
// of the test's that accepts and never answers, so the probe says "no answer" and a private
// redis-server is started there): that server cannot bind the port and exits at start, which
// ends the start at once with a message naming the port, not after a minute of waiting for an
// answer that cannot come. The PostgreSQL side is the configured server, which answers.
import { once } from 'node:events';
import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureServices, SERVICE_PROBE_TIMEOUT_MS } from '../../../harness/services/ensure-services.ts';
import { redisDataDir } from '../../../harness/services/service-data-dir.ts';
import { loadConfig } from '../../../src/config/config.ts';

/**
 * The probe saying "no answer" (its connection, its ready check and its PING each wait up to
 * SERVICE_PROBE_TIMEOUT_MS), then an exit at start: far below SERVICE_START_TIMEOUT_MS.
 */
const NOTICED_WITHIN_MS = 3 * SERVICE_PROBE_TIMEOUT_MS + 5_000;

let blocker: Server | null = null;
let port: number | null = null;

afterAll(() => {
  blocker?.close();
  if (port !== null) rmSync(redisDataDir(port), { recursive: true, force: true });
});

describe('ensureServices', () => {
  it(
    'fails at once, naming the port, when the Redis it starts cannot bind it',
    async () => {
      blocker = createServer(() => undefined);
      blocker.listen(0, '127.0.0.1');
      await once(blocker, 'listening');
      port = (blocker.address() as { port: number }).port;
      const config = loadConfig();
      const t0 = performance.now();
      await expect(
        ensureServices({
          redisUrl: `redis://127.0.0.1:${port}`,
          redisTlsCaFile: null,
          databaseUrl: config.databaseUrl,
        }),
      ).rejects.toThrow(new RegExp(`redis-server exited at start: its port ${port} is in use`));
      expect(performance.now() - t0).toBeLessThan(NOTICED_WITHIN_MS);
    },
    2 * NOTICED_WITHIN_MS,
  );
});
