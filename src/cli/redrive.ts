// `npm run redrive -- --operation-id ID [--operation-id ID2 …] | --all`: sends given-up transfers
// (attempts exhausted, still open in the intake) to the queue again, over redrive() in
// src/intake/relay.ts, and prints what it sent as JSON. The decision then answers each once.
import { loadConfig } from '../config/config.ts';
import { endPool } from '../db/pool-close.ts';
import { createPool } from '../db/prisma.ts';
import { UsageError } from '../errors.ts';
import { redrive } from '../intake/relay.ts';
import { ID_PATTERN } from '../ledger/transfer-request.ts';
import { TransferQueues } from '../queue/producer.ts';
import { bullmqConnection, describeRedisTarget } from '../queue/redis-connection.ts';
import { redisReachable } from '../queue/redis-reachable.ts';
import { parseFlags } from './args.ts';
import { runCli } from './run-cli.ts';

const USAGE = 'npm run redrive -- --operation-id ID [--operation-id ID2 …] | --all';

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    { 'operation-id': { type: 'string', multiple: true }, all: { type: 'boolean' } },
    USAGE,
  );
  const ids = values['operation-id'] ?? [];
  if ((ids.length === 0) === (values.all !== true)) {
    throw new UsageError(`give --operation-id (one or more) or --all, not both\nusage: ${USAGE}`);
  }
  for (const id of ids) {
    if (!ID_PATTERN.test(id))
      throw new UsageError(`an operation id is 1-128 characters of [A-Za-z0-9._:-], got ${JSON.stringify(id)}`);
  }
  const config = loadConfig();
  const connection = bullmqConnection(config);
  await redisReachable(connection, config);
  connection.on('error', () => undefined);
  const queues = TransferQueues.open(connection, config, config.jobAttemptsMax);
  const pool = createPool(config);
  try {
    const result = await redrive(pool, queues, values.all === true ? 'all' : ids);
    const notGivenUp = ids.filter((id) => !result.operationIds.includes(id));
    process.stdout.write(
      `${JSON.stringify({
        redis: describeRedisTarget(config),
        sent: result.operationIds,
        ...(notGivenUp.length > 0 ? { notGivenUp } : {}),
      })}\n`,
    );
  } finally {
    await queues.close();
    connection.disconnect();
    await endPool(pool);
  }
});
process.exit();
