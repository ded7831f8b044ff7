// A minimal relay process for intake chaos runs (`--intake`): relayBatch() of src/intake/relay.ts
// in a loop, until a signal. Configuration is the worker's environment contract
// (src/config/config.ts: DATABASE_URL, REDIS_*, QUEUE_NAME, QUEUE_SHARDS, JOB_ATTEMPTS_MAX) plus
// INTAKE_RESEND_AFTER_MS and RELAY_BATCH_MAX. One JSON line per batch that sent something.
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { runCli } from '../../cli/run-cli.ts';
import { loadConfig } from '../../config/config.ts';
import { relayBatch } from '../../intake/relay.ts';
import { TransferQueues } from '../../queue/producer.ts';
import { bullmqConnection } from '../../queue/redis-connection.ts';

/** Pause after a batch that found less than a full batch due, and after an error. */
const IDLE_MS = 50;
const ERROR_PAUSE_MS = 250;

function log(fields: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify({ time: Date.now(), ...fields })}\n`);
}

await runCli(async () => {
  const config = loadConfig();
  const resendAfterMs = Number(process.env.INTAKE_RESEND_AFTER_MS ?? '30000');
  const batchMax = Number(process.env.RELAY_BATCH_MAX ?? '500');
  const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 2, application_name: 'chaos-relay' });
  pool.on('error', () => undefined);
  const connection = bullmqConnection(config);
  connection.on('error', () => undefined);
  const queues = TransferQueues.open(connection, config, config.jobAttemptsMax);
  for (const q of queues.queues) q.on('error', () => undefined);
  let stopping = false;
  process.on('SIGTERM', () => {
    stopping = true;
  });
  log({ event: 'relay_started', resendAfterMs, batchMax });
  while (!stopping) {
    try {
      const done = await relayBatch(pool, queues, { batchMax, resendAfterMs });
      if (done.sent > 0 || done.givenUp > 0) log({ event: 'relay_batch', ...done });
      if (done.sent < batchMax) await sleep(IDLE_MS);
    } catch (err) {
      log({ event: 'relay_error', error: err instanceof Error ? err.message : String(err) });
      await sleep(ERROR_PAUSE_MS);
    }
  }
  log({ event: 'relay_stopped' });
  await queues.close().catch(() => undefined);
  connection.disconnect();
  await pool.end().catch(() => undefined);
});
process.exit();
