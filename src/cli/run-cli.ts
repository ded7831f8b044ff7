// Shared ending of every command: one clear line for an expected error (bad input, bad
// configuration, a failed migration, a server that does not answer at start, a database not set up
// yet: src/db/database-errors.ts), the stack only for the unexpected; exit code 1.
import { ConfigError } from '../config/config.ts';
import { databaseFaultOf, describeDatabaseFault } from '../db/database-errors.ts';
import { MigrationError } from '../db/migrations.ts';
import { SessionBoundsError } from '../db/session-bounds.ts';
import { WorkerRoleError } from '../db/worker-role-grants.ts';
import { IntakeConflictError } from '../intake/intake.ts';
import { OutcomeFeedPrunedError } from '../intake/outcome-feed.ts';
import { redactText } from '../log/redact.ts';
import { StartupError } from '../ops/startup-error.ts';
import { InvalidTransferError } from '../queue/producer.ts';
import { UsageError } from './args.ts';

const EXPECTED_ERRORS = [
  ConfigError,
  UsageError,
  MigrationError,
  WorkerRoleError,
  SessionBoundsError,
  StartupError,
  IntakeConflictError,
  InvalidTransferError,
  OutcomeFeedPrunedError,
  RangeError,
] as const;

export async function runCli(main: () => Promise<void>): Promise<void> {
  try {
    await main();
  } catch (err) {
    process.exitCode = 1;
    const fault = databaseFaultOf(err);
    if (fault !== null) {
      process.stderr.write(`error: ${fault.variable}: ${redactText(describeDatabaseFault(fault))}\n`);
      return;
    }
    const expected = EXPECTED_ERRORS.some((kind) => err instanceof kind);
    // Error texts can quote a connection URL (a driver's message, a stack): never its password.
    const message = redactText(err instanceof Error ? err.message : String(err));
    process.stderr.write(`${err instanceof ConfigError ? 'configuration error' : 'error'}: ${message}\n`);
    if (!expected && err instanceof Error && err.stack) process.stderr.write(`${redactText(err.stack)}\n`);
  }
}
