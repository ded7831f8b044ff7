// A stand-in relay process for the bench's e2e-intake cases until `npm run relay` exists: a loop
// of relayBatch() (src/intake/relay.ts) while anything is due, a short rest when nothing is,
// until SIGTERM/SIGINT. Configuration from the same environment as the worker's
// (src/config/config.ts), plus BENCH_RELAY_BATCH_MAX.
import { setTimeout as sleep } from 'node:timers/promises';
import { runCli } from '../../cli/run-cli.ts';
import { loadConfig } from '../../config/config.ts';
import { endPool } from '../../db/pool-close.ts';
import { createPool } from '../../db/prisma.ts';
import { relayBatch } from '../../intake/relay.ts';
import { createLogger } from '../../log/logger.ts';
import { TransferQueues } from '../../queue/producer.ts';
import { bullmqConnection } from '../../queue/redis-connection.ts';

const IDLE_MS = 20;
const RESEND_AFTER_MS = 30_000;

await runCli(async () => {
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'bench-relay');
  const batchMax = Number(process.env.BENCH_RELAY_BATCH_MAX ?? '500');
  const pool = createPool({ ...config, dbPoolMax: 2 }, (err) => logger.warn({ err: err.message }, 'pool error'));
  const connection = bullmqConnection(config);
  connection.on('error', (err) => logger.warn({ err: err.message }, 'redis connection error'));
  const queues = TransferQueues.open(connection, config, config.jobAttemptsMax);
  let stopping = false;
  const stop = () => {
    stopping = true;
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  while (!stopping) {
    try {
      const result = await relayBatch(pool, queues, { batchMax, resendAfterMs: RESEND_AFTER_MS });
      if (result.sent === 0) await sleep(IDLE_MS);
    } catch (err) {
      logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'relay round failed');
      await sleep(IDLE_MS * 5);
    }
  }
  await queues.close();
  connection.disconnect();
  await endPool(pool);
});
process.exit();
