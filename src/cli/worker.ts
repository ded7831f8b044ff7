// `npm run worker`: one worker process. Scale by running more of them; they share nothing but
// Redis and PostgreSQL. SIGTERM/SIGINT finish the jobs in hand, then exit (see run-worker.ts).
// Traces when OpenTelemetry's environment names an endpoint (src/tracing/tracing.ts): started
// first, flushed last.
import { runWorkerProcess } from '../queue/run-worker.ts';
import { startTracing, stopTracing } from '../tracing/tracing.ts';
import { runCli } from './run-cli.ts';

await runCli(async () => {
  await startTracing('fenced-transfers-worker');
  process.exitCode = await runWorkerProcess('worker');
});
await stopTracing();
// Explicitly: a connection still closing must not keep a stopped worker alive.
process.exit();
