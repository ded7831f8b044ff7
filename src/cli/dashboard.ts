// `npm run dashboard`: Bull Board for the transfers queue (QUEUE_NAME, every shard of it) on DASHBOARD_HOST:DASHBOARD_PORT,
// read-only unless DASHBOARD_READ_ONLY=false. Prints {url, queues, readOnly} once listening;
// SIGINT/SIGTERM stop it.
import { loadConfig } from '../config/config.ts';
import { startDashboard } from '../dashboard/server.ts';
import { createLogger } from '../log/logger.ts';
import { queueShardsOf } from '../queue/queue-shards.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
}

await runCli(async () => {
  parseFlags(process.argv.slice(2), {}, 'npm run dashboard');
  const config = loadConfig();
  const logger = createLogger(config.logLevel, 'dashboard');
  const stopped = stopSignal();
  // Every shard of the queue (QUEUE_SHARDS), with its BullMQ prefix.
  const shards = queueShardsOf(config);
  const queueNames = shards.map((s) => s.name);
  const dashboard = await startDashboard({
    host: config.dashboardHost,
    port: config.dashboardPort,
    queueNames,
    queuePrefixes: Object.fromEntries(shards.map((s) => [s.name, s.prefix])),
    redisUrl: config.redisUrl,
    redisTlsCaFile: config.redisTlsCaFile,
    redisCluster: config.redisCluster,
    readOnly: config.dashboardReadOnly,
    logger,
  });
  process.stdout.write(
    `${JSON.stringify({ url: dashboard.url, queues: queueNames, readOnly: config.dashboardReadOnly })}\n`,
  );
  const signal = await stopped;
  logger.info({ signal }, 'stopping dashboard');
  await dashboard.close();
});
