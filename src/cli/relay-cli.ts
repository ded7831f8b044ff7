// `npm run relay`: one relay process (src/intake/relay-runtime.ts). It moves requested transfers
// from the intake to the queue, sends again those still undecided after INTAKE_RESEND_AFTER_MS,
// and publishes the outcome feed to the outcomes queue. Run any number of them; SIGTERM/SIGINT
// finish the round in hand, then exit 0.
import { runRelayProcess } from '../intake/relay-runtime.ts';
import { runCli } from './run-cli.ts';

await runCli(async () => {
  process.exitCode = await runRelayProcess('relay');
});
// Explicitly: a connection still closing must not keep a stopped relay alive.
process.exit();
