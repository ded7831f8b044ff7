// The PostgreSQL lock service (LOCK_BACKEND=postgres): no lock server besides the database. A
// wallet's lock is a session advisory lock on the 64-bit hash of `<prefix>wallet:<id>`, taken by
// lock_try_acquire(), which also draws the token from the lock_tokens sequence: the number comes
// from the database that checks it, so no counter lives outside the source of truth and none
// can be lost in another server's failover.
//
// Session-scoped, on one connection of the process's own, outside the decision pool: the lock
// must span the job (acquire, the decision's transaction on a pooled connection, release), which
// a transaction-scoped lock (pg_try_advisory_xact_lock) cannot; one taken inside the decision's
// own transaction would only repeat the row lock the decision takes anyway. A session lock has no
// TTL of its own: it lasts as long as the session. The session is opened with
// `idle_session_timeout = lockTtlMs`, so a holder that stops sending (frozen, cut off) has its
// session ended by the server a TTL after its last statement, and its locks with it. The
// watchdog's renewal is a statement on that session (lock_held()), every third of the TTL, so a
// live holder's session is never idle that long; its deadline is counted from the renewal's send,
// before the server's idle clock starts, so the holder gives up first.
//
// Every lease lives on the session that took it: when the connection fails, every lease of the
// process is lost at once (their renewals answer "not ours"), and the next acquire opens a new
// session. Through PgBouncer in transaction mode two statements may reach two server sessions;
// the configuration refuses that setup (LOCK_DATABASE_URL must reach PostgreSQL itself), and
// every statement here also returns pg_backend_pid(): a session that changes under the client
// ends every lease and is reported as the misconfiguration it is.
import pg from 'pg';
import { DB_CONNECTION_TIMEOUT_MS, DB_KEEPALIVE_IDLE_MS } from '../db/prisma.ts';
import { type ProbeResult, withinMs } from '../ops/probes.ts';
import { assertKeyPrefix, assertWalletId } from './lock-keys.ts';
import {
  type AdvanceFenceResult,
  composeToken,
  LockService,
  type LockServiceOptions,
  type RawAcquire,
} from './lock-service.ts';

export interface PostgresLockOptions extends LockServiceOptions {
  /** PostgreSQL itself (never PgBouncer in transaction mode); the role may execute the lock functions. */
  readonly connectionString: string;
  /** Prepended to every key, so tenants and tests do not collide. */
  readonly keyPrefix?: string;
}

/** The session changed under the client: statements are spread over server sessions (a pooler). */
export class LockSessionMovedError extends Error {
  override name = 'LockSessionMovedError';
}

interface Session {
  readonly client: pg.Client;
  readonly pid: number;
  /** Set once the connection failed or ended: its locks are gone with it. */
  dead: boolean;
  /** The statement in flight (settled), the next waits for it. */
  queue: Promise<unknown>;
}

interface LockRow {
  token: string | null;
  pid: number;
}

interface HeldRow {
  held: boolean;
  pid: number;
}

export class PostgresLock extends LockService {
  readonly backend = 'postgres' as const;
  readonly keyPrefix: string;
  private readonly connectionString: string;
  private session: Promise<Session> | null = null;
  /** The session `session` resolved to, while it lives. */
  private opened: Session | null = null;
  /** owner → the session its lock lives on. */
  private readonly sessionOf = new Map<string, Session>();

  constructor(options: PostgresLockOptions) {
    super(options);
    this.keyPrefix = options.keyPrefix ?? '';
    assertKeyPrefix(this.keyPrefix);
    this.connectionString = options.connectionString;
  }

  keyOf(walletId: string): string {
    assertWalletId(walletId);
    return `${this.keyPrefix}wallet:${walletId}`;
  }

  protected async tryAcquire(walletId: string, owner: string): Promise<RawAcquire> {
    const key = this.keyOf(walletId);
    const session = await this.currentSession();
    // The server's idle clock starts after the reply, so a lease counted from here ends first.
    const startedAtMs = performance.now();
    const row = await this.query<LockRow>(
      session,
      'SELECT lock_try_acquire($1)::text AS token, pg_backend_pid() AS pid',
      [key],
    );
    if (row.token === null) return { kind: 'busy', retryAfterMs: this.lockTtlMs };
    this.sessionOf.set(owner, session);
    return { kind: 'acquired', raw: BigInt(row.token), startedAtMs };
  }

  async renew(_walletId: string, owner: string): Promise<boolean> {
    const session = this.sessionOf.get(owner);
    if (session === undefined || session.dead) return false;
    const row = await this.query<HeldRow>(session, 'SELECT lock_held($1) AS held, pg_backend_pid() AS pid', [
      this.keyOf(_walletId),
    ]);
    return row.held;
  }

  protected async releaseOwned(walletId: string, owner: string): Promise<boolean> {
    const session = this.sessionOf.get(owner);
    this.sessionOf.delete(owner);
    if (session === undefined || session.dead) return false;
    const row = await this.query<HeldRow>(session, 'SELECT lock_release($1) AS held, pg_backend_pid() AS pid', [
      this.keyOf(walletId),
    ]);
    return row.held;
  }

  /**
   * The sequence only grows, and the fences it is compared with live in the same database: a
   * refused number below the sequence's last one means a newer holder wrote, and the next acquire
   * is above it. At or above it, the sequence was set back by hand: only a new epoch helps.
   */
  protected async raiseRaw(_walletId: string, raw: bigint): Promise<AdvanceFenceResult> {
    const session = await this.currentSession();
    const row = await this.query<{ last: string; pid: number }>(
      session,
      'SELECT lock_tokens_last()::text AS last, pg_backend_pid() AS pid',
      [],
    );
    const last = BigInt(row.last);
    return { kind: raw < last ? 'unchanged' : 'behind', fence: composeToken(this.epoch, last) };
  }

  async probe(timeoutMs: number): Promise<ProbeResult> {
    try {
      const session = await withinMs(this.currentSession(), timeoutMs, 'the lock connection');
      await withinMs(this.query(session, 'SELECT 1 AS one, pg_backend_pid() AS pid', []), timeoutMs, 'SELECT 1');
      return { ok: true };
    } catch (err) {
      return {
        ok: false,
        variable: 'LOCK_DATABASE_URL',
        detail: `the lock's PostgreSQL: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
  }

  async close(): Promise<void> {
    const pending = this.session;
    this.session = null;
    this.opened = null;
    if (pending === null) return;
    const session = await pending.catch(() => null);
    if (session === null) return;
    session.dead = true;
    await withinMs(session.client.end(), DB_CONNECTION_TIMEOUT_MS, 'closing the lock connection').catch(
      () => undefined,
    );
  }

  /** The live session, opened when there is none (at the first acquire, after a failure). */
  private currentSession(): Promise<Session> {
    if (this.session === null) {
      const opening = this.openSession();
      this.session = opening;
      opening.catch(() => {
        if (this.session === opening) this.session = null;
      });
    }
    return this.session;
  }

  private async openSession(): Promise<Session> {
    const client = new pg.Client({
      connectionString: this.connectionString,
      connectionTimeoutMillis: DB_CONNECTION_TIMEOUT_MS,
      // A statement with no answer fails within a TTL: by then the lease is over anyway.
      query_timeout: this.lockTtlMs,
      keepAlive: true,
      keepAliveInitialDelayMillis: DB_KEEPALIVE_IDLE_MS,
      application_name: 'fenced-transfers-lock',
      // The lease: a session that sends nothing for a TTL is ended by the server, its locks too.
      options: `-c idle_session_timeout=${this.lockTtlMs} -c statement_timeout=${this.lockTtlMs}`,
    });
    const lost = (err?: Error): void => this.sessionLost(session, err);
    let session: Session | undefined;
    client.on('error', lost);
    client.on('end', () => lost());
    await client.connect();
    const result = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const pid = result.rows[0]?.pid;
    if (typeof pid !== 'number') throw new Error('the lock connection did not say its backend pid');
    session = { client, pid, dead: false, queue: Promise.resolve() };
    this.opened = session;
    return session;
  }

  private sessionLost(session: Session | undefined, err?: Error): void {
    if (session === undefined || session.dead) return;
    session.dead = true;
    if (this.opened === session) {
      this.opened = null;
      this.session = null;
    }
    this.logger.warn(
      { event: 'lock_session_lost', backend: this.backend, pid: session.pid, err: err?.message },
      'the lock connection ended: every lease on it is lost',
    );
    session.client.end().catch(() => undefined);
  }

  /** One row, on `session`; a session that changed under the client ends every lease on it. */
  private async query<R extends { pid: number }>(session: Session, text: string, values: unknown[]): Promise<R> {
    if (session.dead) throw new Error('the lock connection has ended');
    // One statement at a time on the session, in the order asked (pg's own queue is deprecated).
    const turn = session.queue.then(() => session.client.query<R>(text, values));
    session.queue = turn.catch(() => undefined);
    const result = await turn;
    const row = result.rows[0];
    if (row === undefined) throw new Error(`the lock query returned no row: ${text}`);
    if (row.pid !== session.pid) {
      this.sessionLost(session);
      throw new LockSessionMovedError(
        `the lock connection reached server session ${row.pid} after ${session.pid}: LOCK_DATABASE_URL must reach PostgreSQL itself, not PgBouncer in transaction mode`,
      );
    }
    return row;
  }
}
