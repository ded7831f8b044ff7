// `npm run status -- <operationId>`: the stored outcome as JSON; exit 1 when unknown.
// `npm run status` (no argument): the job counts of every queue shard, and their sum, as JSON.
import { type Config, loadConfig } from '../config/config.ts';
import { createPrisma } from '../db/prisma.ts';
import { ID_PATTERN } from '../ledger/transfer-request.ts';
import { readTransfer } from '../ledger/transfer-status.ts';
import { TransferQueues } from '../queue/producer.ts';
import { queueProgress } from '../queue/queue-drain.ts';
import { bullmqConnection, describeRedisTarget } from '../queue/redis-connection.ts';
import { redisReachable } from '../queue/redis-reachable.ts';
import { parseFlags, UsageError } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run status -- [<operationId>]';

async function queueStatus(config: Config): Promise<void> {
  const connection = bullmqConnection(config);
  await redisReachable(connection, config);
  connection.on('error', () => undefined);
  const queues = TransferQueues.open(connection, config, config.jobAttemptsMax);
  try {
    const shards = await Promise.all(
      queues.shards.map(async ({ shard, queue }) => ({
        shard: shard.index,
        queue: shard.name,
        prefix: shard.prefix,
        ...(await queueProgress(queue)),
      })),
    );
    process.stdout.write(
      `${JSON.stringify({ redis: describeRedisTarget(config), shards, total: await queueProgress(queues.queues) })}\n`,
    );
  } finally {
    await queues.close();
    connection.disconnect();
  }
}

await runCli(async () => {
  const { positionals } = parseFlags(process.argv.slice(2), {}, USAGE, 1);
  const config = loadConfig();
  const operationId = positionals[0];
  if (operationId === undefined) {
    await queueStatus(config);
    return;
  }
  if (!ID_PATTERN.test(operationId)) throw new UsageError('an operation id is 1-128 characters of [A-Za-z0-9._:-]');
  const prisma = createPrisma(config);
  try {
    const record = await readTransfer(prisma, operationId);
    if (record === null) {
      process.stdout.write(`${JSON.stringify({ operationId, status: 'unknown' })}\n`);
      process.exitCode = 1;
      return;
    }
    process.stdout.write(`${JSON.stringify(record)}\n`);
  } finally {
    await prisma.$disconnect();
  }
});
