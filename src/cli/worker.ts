// `npm run worker`: one worker process. Scale by running more of them; they share nothing but
// Redis and PostgreSQL. SIGTERM/SIGINT finish the jobs in hand, then exit (see run-worker.ts).
import { runWorkerProcess } from '../queue/run-worker.ts';
import { runCli } from './run-cli.ts';

await runCli(async () => {
  process.exitCode = await runWorkerProcess('worker');
});
// Explicitly: a connection still closing must not keep a stopped worker alive.
process.exit();
