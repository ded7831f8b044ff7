// The mistakes a newcomer makes with PostgreSQL, in one line that names DATABASE_URL and the step
// that fixes it: a database or its tables not there yet, a server that does not answer, a role or
// password the server refuses, a role without the owner's rights. pg and Prisma (through
// @prisma/adapter-pg) carry the same SQLSTATEs and socket codes in different places; they are read
// here once, for every command (src/cli/run-cli.ts) and the worker's readiness probe.
import { SOCKET_PROBLEMS } from '../ops/socket-problem.ts';

/** The variable every fault below points at: it names the server, the database, the role and its password. */
export const DATABASE_URL_VARIABLE = 'DATABASE_URL';

export interface DatabaseFault {
  readonly variable: typeof DATABASE_URL_VARIABLE;
  /** What went wrong, from the server's own words; never a password (the server does not say it). */
  readonly problem: string;
  /** The step that fixes it, when there is one to name. */
  readonly fix: string | null;
  /** True when no session was established at all (socket level), false when the server answered. */
  readonly unreachable: boolean;
}

const MIGRATE_FIRST = 'run npm run db:migrate first';

/** What an error says about the server: its SQLSTATE or socket code, its words, where it was going. */
interface Signals {
  sqlState: string | null;
  socketCode: string | null;
  message: string;
  host: string | null;
  port: number | null;
}

type Loose = Record<string, unknown> | null | undefined;

function text(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

function portOf(value: unknown): number | null {
  const n = typeof value === 'string' ? Number(value) : value;
  return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : null;
}

/** A socket error of node (or the first of an AggregateError: `localhost` tries ::1 and 127.0.0.1). */
function socketSignals(err: Loose): Signals | null {
  const first = err instanceof AggregateError && err.errors.length > 0 ? (err.errors[0] as Loose) : err;
  const code = text(err?.code) ?? text(first?.code);
  if (code === null || !/^E[A-Z]+$/.test(code)) return null;
  return {
    sqlState: null,
    socketCode: code,
    message: text(first?.message) ?? code,
    host: text(first?.address) ?? text(first?.hostname),
    port: portOf(first?.port),
  };
}

/** @prisma/adapter-pg's view of the driver error: `meta.driverAdapterError.cause`. */
function prismaSignals(err: Loose): Signals | null {
  const meta = err?.meta as Loose;
  const cause = (meta?.driverAdapterError as Loose)?.cause as Loose;
  if (cause === undefined || cause === null) return null;
  const sqlState = text(cause.originalCode);
  if (sqlState !== null) {
    return { sqlState, socketCode: null, message: text(cause.originalMessage) ?? sqlState, host: null, port: null };
  }
  if (cause.kind === 'DatabaseNotReachable') {
    // The adapter keeps the address of a refused connection and only the host of an unknown one.
    const port = portOf(cause.port);
    return {
      sqlState: null,
      socketCode: port === null ? 'ENOTFOUND' : 'ECONNREFUSED',
      message: '',
      host: text(cause.host),
      port,
    };
  }
  if (cause.kind === 'SocketTimeout')
    return { sqlState: null, socketCode: 'ETIMEDOUT', message: '', host: null, port: null };
  if (cause.kind === 'ConnectionClosed')
    return { sqlState: null, socketCode: 'ECONNRESET', message: '', host: null, port: null };
  return null;
}

function signalsOf(err: unknown): Signals | null {
  if (err === null || typeof err !== 'object') return null;
  const loose = err as Loose;
  const prisma = prismaSignals(loose);
  if (prisma !== null) return prisma;
  // pg's DatabaseError: a five-character SQLSTATE in `code` and the server's message.
  const code = text(loose?.code);
  if (code !== null && /^[0-9A-Z]{5}$/.test(code) && typeof loose?.severity === 'string') {
    return { sqlState: code, socketCode: null, message: text(loose?.message) ?? code, host: null, port: null };
  }
  const socket = socketSignals(loose);
  if (socket !== null) return socket;
  // pg-pool's and pg's own words when no connection came within connectionTimeoutMillis.
  const message = err instanceof Error ? err.message : '';
  if (/timeout exceeded when trying to connect|connection timeout/i.test(message)) {
    return { sqlState: null, socketCode: 'ETIMEDOUT', message, host: null, port: null };
  }
  return null;
}

function unreachable(s: Signals): DatabaseFault | null {
  const problem = s.socketCode === null ? undefined : SOCKET_PROBLEMS[s.socketCode];
  if (problem === undefined) return null;
  const where = s.host === null ? '' : ` at ${s.host}${s.port === null ? '' : `:${s.port}`}`;
  return {
    variable: DATABASE_URL_VARIABLE,
    problem: `cannot reach PostgreSQL${where}: ${problem}`,
    fix: null,
    unreachable: true,
  };
}

function answered(problem: string, fix: string | null): DatabaseFault {
  return { variable: DATABASE_URL_VARIABLE, problem, fix, unreachable: false };
}

/** The server answered with a SQLSTATE a newcomer's setup explains; null for any other. */
function refused(s: Signals): DatabaseFault | null {
  switch (s.sqlState) {
    case '3D000': // invalid_catalog_name: the database in the URL is not there yet
      return answered(s.message, MIGRATE_FIRST);
    case '42P01': // undefined_table
      return answered(`the tables are missing (${s.message})`, MIGRATE_FIRST);
    case '42883': // undefined_function: the decision function, before its migration
      return /^function /.test(s.message) ? answered(`a function is missing (${s.message})`, MIGRATE_FIRST) : null;
    case '28P01': // invalid_password
      return answered(s.message, 'check the user name and password in DATABASE_URL');
    case '28000': // invalid_authorization_specification: no such role, or pg_hba.conf says no
      return /^role ".*" does not exist$/.test(s.message)
        ? answered(s.message, 'check the user name in DATABASE_URL (npm run db:worker-role creates the worker role)')
        : answered(s.message, "check the user in DATABASE_URL and the server's pg_hba.conf");
    case '42501': // insufficient_privilege
      return answered(s.message, 'this command needs the database owner: put the owner in DATABASE_URL');
    case '57P03': // cannot_connect_now: starting up or shutting down
      return answered(s.message, 'try again in a moment');
    default:
      return null;
  }
}

/** What a database error means for a person setting things up, or null when it is not one of those. */
export function databaseFaultOf(err: unknown): DatabaseFault | null {
  const s = signalsOf(err);
  if (s === null) return null;
  return s.sqlState === null ? unreachable(s) : refused(s);
}

/** The fault as the text after `<variable>: ` on a command's one error line. */
export function describeDatabaseFault(fault: DatabaseFault): string {
  return fault.fix === null ? fault.problem : `${fault.problem}: ${fault.fix}`;
}

/** The SQLSTATE and the server's message of a PostgreSQL error (pg's or Prisma's), or null. */
export function serverErrorOf(err: unknown): { sqlState: string; message: string } | null {
  const s = signalsOf(err);
  return s === null || s.sqlState === null ? null : { sqlState: s.sqlState, message: s.message };
}
