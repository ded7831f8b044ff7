// Shared ending of every command: one clear line for an expected error (bad input, bad
// configuration, a failed migration, a server that does not answer at start, a database not set up
// yet: src/db/database-errors.ts), the stack only for the unexpected; exit code 1.
import { databaseFaultOf, describeDatabaseFault } from '../db/database-errors.ts';
import {
  ConfigError,
  IntakeConflictError,
  InvalidTransferError,
  MigrationError,
  OutcomeFeedPrunedError,
  SessionBoundsError,
  StartupError,
  UnknownWalletError,
  UsageError,
  WorkerRoleError,
} from '../errors.ts';
import { redactText } from '../log/redact.ts';

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
  UnknownWalletError,
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
