// `npm run relay`: one relay process (src/intake/relay-runtime.ts). It moves requested transfers
// from the intake to the queue, sends again those still undecided after INTAKE_RESEND_AFTER_MS,
// and publishes the outcome feed to the outcomes queue. Run any number of them; SIGTERM/SIGINT
// finish the round in hand, then exit 0. Traces when OpenTelemetry's environment names an
// endpoint (src/tracing/tracing.ts): started first, flushed last.
import { runRelayProcess } from '../intake/relay-runtime.ts';
import { startTracing, stopTracing } from '../tracing/tracing.ts';
import { runCli } from './run-cli.ts';

await runCli(async () => {
  await startTracing('fenced-transfers-relay');
  process.exitCode = await runRelayProcess('relay');
});
await stopTracing();
// Explicitly: a connection still closing must not keep a stopped relay alive.
process.exit();
