// `npm run status -- <operationId>`: the stored outcome of an operation of any kind as JSON (a
// hold with its state, a transfer, hold or split with what was refunded of it); exit 1 when unknown.
// `npm run status` (no argument): the job counts of every queue shard, and their sum, and the
// intake (open requests, never sent, given up, and the first GIVEN_UP_LISTED given-up operations
// with their reason: `npm run redrive` sends them again), as JSON.
import { type Config, loadConfig } from '../config/config.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool, createPrisma } from '../db/prisma.ts';
import { UsageError } from '../errors.ts';
import { intakeBacklog } from '../intake/relay.ts';
import { ID_PATTERN } from '../ledger/transfer-request.ts';
import { readOperation } from '../ledger/transfer-status.ts';
import { TransferQueues } from '../queue/producer.ts';
import { queueProgress } from '../queue/queue-drain.ts';
import { bullmqConnection, describeRedisTarget } from '../queue/redis-connection.ts';
import { redisReachable } from '../queue/redis-reachable.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run status -- [<operationId>]';
/** Given-up operations listed by id, at most (the oldest first). */
export const GIVEN_UP_LISTED = 20;

async function intakeStatus(config: Config) {
  const pool = createPool(config);
  try {
    const backlog = await intakeBacklog(pool);
    const { rows } = await pool.query<{ operation_id: string; reason: string | null; given_up_at: Date }>(
      `SELECT operation_id, give_up_reason AS reason, given_up_at FROM transfer_requests
        WHERE decided_at IS NULL AND given_up_at IS NOT NULL ORDER BY given_up_at, operation_id LIMIT $1`,
      [GIVEN_UP_LISTED],
    );
    return {
      open: backlog.open,
      neverSent: backlog.unsent,
      givenUp: backlog.givenUp,
      lagSeconds: backlog.lagSeconds,
      givenUpOperations: rows.map((r) => ({ operationId: r.operation_id, reason: r.reason, givenUpAt: r.given_up_at })),
    };
  } finally {
    await endPool(pool);
  }
}

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
    const total = await queueProgress(queues.queues);
    const intake = await intakeStatus(config);
    process.stdout.write(`${JSON.stringify({ redis: describeRedisTarget(config), shards, total, intake })}\n`);
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
    const record = await readOperation(prisma, operationId);
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
