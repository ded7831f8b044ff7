// `npm run worker`: one worker process. Scale by running more of them; they share nothing but
// Redis and PostgreSQL. SIGTERM/SIGINT finish the jobs in hand, then exit.
import { runWorkerProcess } from '../queue/run-worker.ts';
import { runCli } from './run-cli.ts';

await runCli(() => runWorkerProcess('worker'));
