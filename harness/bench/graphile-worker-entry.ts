// A Graphile Worker instance for the peer-graphile-worker case: a PostgreSQL-only job queue
// a team might pick instead. Its one task, `transfer`, validates the job like our worker and
// calls the same apply_transfer() (harness/bench/decision-call.ts). Settings are Graphile Worker's
// own batching recommendations (harness/bench/graphile-settings.ts): local queue, batched completion.
// DATABASE_URL, WORKER_CONCURRENCY and LOG_LEVEL come from the usual configuration.
import { Logger, type LogLevel, run, type Task } from 'graphile-worker';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { validateTransferRequest } from '../../src/ledger/transfer-request.ts';
import { failureMessage } from '../../src/ledger/vocabulary.ts';
import { createLogger } from '../../src/log/logger.ts';
import { decide } from './decision-call.ts';
import {
  GRAPHILE_COMPLETE_BATCH_DELAY_MS,
  GRAPHILE_LOCAL_QUEUE_SIZE,
  GRAPHILE_TASK,
  graphilePoolMax,
} from './graphile-settings.ts';

await runCli(async () => {
  const config = loadConfig();
  const log = createLogger(config.logLevel, 'graphile-worker');
  const levels: Record<LogLevel, 'error' | 'warn' | 'info' | 'debug'> = {
    error: 'error',
    warning: 'warn',
    info: 'info',
    debug: 'debug',
  };
  const logger = new Logger((scope) => (level, message, meta) => {
    log[levels[level]]({ scope, ...meta }, message);
  });
  const transfer: Task = async (payload, helpers) => {
    const verdict = validateTransferRequest(payload, config.transferAmountMax);
    if (!verdict.ok) throw new Error(failureMessage('invalid_request', verdict.reason));
    const outcome = await decide({ query: (text, values) => helpers.query(text, values) }, verdict.request);
    if (outcome !== 'applied' && outcome !== 'duplicate') throw new Error(`unexpected outcome ${outcome}`);
  };
  const runner = await run({
    preset: {
      worker: {
        connectionString: config.databaseUrl,
        concurrentJobs: config.workerConcurrency,
        maxPoolSize: graphilePoolMax(config.workerConcurrency),
        localQueue: { size: GRAPHILE_LOCAL_QUEUE_SIZE },
        completeJobBatchDelay: GRAPHILE_COMPLETE_BATCH_DELAY_MS,
        failJobBatchDelay: GRAPHILE_COMPLETE_BATCH_DELAY_MS,
        logger,
      },
    },
    taskList: { [GRAPHILE_TASK]: transfer },
    noHandleSignals: true,
  });
  log.info({ concurrency: config.workerConcurrency }, 'graphile worker started');
  await new Promise<void>((resolve) => {
    const stop = () => void runner.stop().then(resolve, resolve);
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await runner.promise.catch(() => undefined);
});
