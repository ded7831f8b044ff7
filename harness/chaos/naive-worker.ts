// A worker process for `--apply naive`: the same queue, lock, watchdog and metrics as
// src/cli/worker.ts, but the decision is the naive read-modify-write of naive-apply.ts.
// It runs as a process of its own so the harness can SIGSTOP it mid-transfer.
// Configuration comes from the same environment contract (src/config/config.ts).
import { runCli } from '../../src/cli/run-cli.ts';
import { isPaymentRequest } from '../../src/ledger/transfer-request.ts';
import { runWorkerProcess } from '../../src/queue/run-worker.ts';
import { naiveApply } from './naive-apply.ts';

await runCli(async () => {
  process.exitCode = await runWorkerProcess('naive-worker', ({ config, prisma, logger }) => {
    const fence = !config.unsafe.includes('no-fencing');
    logger.warn({ fence }, 'NAIVE APPLY: read-modify-write of absolute balances; for the chaos harness only');
    return (request, token, lease) => {
      // The naive read-modify-write knows transfers only: the chaos harness sends nothing else
      // to a naive worker.
      if (isPaymentRequest(request)) throw new Error(`the naive apply decides transfers only, not a ${request.kind}`);
      return naiveApply(prisma, request, token, { fence, assertHeld: () => lease?.assertHeld() });
    };
  });
});
process.exit();
