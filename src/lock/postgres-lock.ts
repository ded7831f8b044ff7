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
// watchdog's renewal is a statement on that session, every third of the TTL, so a live holder's
// session is never idle that long; its deadline is counted from the renewal's send, before the
// server's idle clock starts, so the holder gives up first. A session lock ends only with the
// session or its own unlock, so a renewal only asks that the session still lives: one ping,
// sent after the renewal asked, answers every wallet's renewal waiting for it.
//
// Cheap on the server: a turn's acquisitions go out as one statement (lock_try_acquire() of up to
// 256 keys), its releases as another, as the Redis scripts do; no statement reads pg_locks. The
// keys this process holds are kept here, and a key held (or being acquired) is busy without a
// statement: advisory locks stack within a session, so the server would grant it again.
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
import { flushEachTurn, TurnGatherer } from './turn-gatherer.ts';

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
  /** The last ping sent on the session: when, and its answer. */
  ping: { readonly sentAtMs: number; readonly answered: Promise<void> } | null;
  /** A turn's acquisitions and releases, one statement each. */
  readonly acquires: TurnGatherer<string, bigint | null>;
  readonly releases: TurnGatherer<string, boolean>;
}

/** What the process holds: key → the owner and the session its lock lives on (none while acquiring). */
interface HeldKey {
  readonly owner: string | null;
  readonly session: Session | null;
}

export class PostgresLock extends LockService {
  readonly backend = 'postgres' as const;
  readonly keyPrefix: string;
  private readonly connectionString: string;
  private session: Promise<Session> | null = null;
  /** The session `session` resolved to, while it lives. */
  private opened: Session | null = null;
  /** Every key this process holds or is acquiring. */
  private readonly keys = new Map<string, HeldKey>();

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
    if (this.keys.has(key)) return { kind: 'busy', retryAfterMs: this.lockTtlMs };
    this.keys.set(key, { owner: null, session: null });
    try {
      const session = await this.currentSession();
      // The server's idle clock starts after the reply, so a lease counted from here ends first.
      const startedAtMs = performance.now();
      const token = await session.acquires.call(key);
      if (token === null) {
        this.keys.delete(key);
        return { kind: 'busy', retryAfterMs: this.lockTtlMs };
      }
      this.keys.set(key, { owner, session });
      return { kind: 'acquired', raw: token, startedAtMs };
    } catch (err) {
      // The statement may have run: the lock, if taken, ends with the session, never reused.
      this.keys.delete(key);
      throw err;
    }
  }

  /** True while the session the lease lives on answers a ping sent after this call began. */
  async renew(walletId: string, owner: string): Promise<boolean> {
    const askedAtMs = performance.now();
    const held = this.keys.get(this.keyOf(walletId));
    if (held?.owner !== owner || held.session === null || held.session.dead) return false;
    await this.pingSentAfter(held.session, askedAtMs);
    return !held.session.dead && this.keys.get(this.keyOf(walletId))?.owner === owner;
  }

  protected async releaseOwned(walletId: string, owner: string): Promise<boolean> {
    const key = this.keyOf(walletId);
    const held = this.keys.get(key);
    if (held?.owner !== owner || held.session === null) return false;
    this.keys.delete(key);
    if (held.session.dead) return false;
    return held.session.releases.call(key);
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

  /**
   * Resolves once a ping sent at or after `askedAtMs` was answered on `session`: the one in flight
   * if it left late enough, else the next (one ping at a time, shared by every renewal waiting).
   */
  private async pingSentAfter(session: Session, askedAtMs: number): Promise<void> {
    for (;;) {
      const ping = session.ping;
      if (ping !== null && ping.sentAtMs >= askedAtMs) return ping.answered;
      if (ping !== null) await ping.answered.catch(() => undefined);
      if (session.ping === ping) {
        const sentAtMs = performance.now();
        const answered = this.query(session, 'SELECT pg_backend_pid() AS pid', []).then(() => undefined);
        session.ping = { sentAtMs, answered };
        return answered;
      }
    }
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
    session = this.sessionOf(client, pid);
    this.opened = session;
    return session;
  }

  /** A session record with its turn gatherers: releases go out before acquisitions, as in Redis. */
  private sessionOf(client: pg.Client, pid: number): Session {
    const schedule = flushEachTurn(() => {
      session.releases.flush();
      session.acquires.flush();
    });
    const session: Session = {
      client,
      pid,
      dead: false,
      queue: Promise.resolve(),
      ping: null,
      acquires: new TurnGatherer((keys) => this.acquireAll(session, keys), schedule, true),
      releases: new TurnGatherer((keys) => this.releaseKeys(session, keys), schedule, true),
    };
    return session;
  }

  private async acquireAll(session: Session, keys: readonly string[]): Promise<(bigint | null)[]> {
    const row = await this.query<{ tokens: (string | null)[]; pid: number }>(
      session,
      'SELECT lock_try_acquire($1::text[])::text[] AS tokens, pg_backend_pid() AS pid',
      [keys],
    );
    if (row.tokens.length !== keys.length)
      throw new Error(`lock_try_acquire answered ${row.tokens.length} of ${keys.length}`);
    return row.tokens.map((t) => (t === null ? null : BigInt(t)));
  }

  private async releaseKeys(session: Session, keys: readonly string[]): Promise<boolean[]> {
    const row = await this.query<{ released: boolean[]; pid: number }>(
      session,
      'SELECT lock_release($1::text[]) AS released, pg_backend_pid() AS pid',
      [keys],
    );
    if (row.released.length !== keys.length)
      throw new Error(`lock_release answered ${row.released.length} of ${keys.length}`);
    return row.released;
  }

  private sessionLost(session: Session | undefined, err?: Error): void {
    if (session === undefined || session.dead) return;
    session.dead = true;
    if (this.opened === session) {
      this.opened = null;
      this.session = null;
    }
    // Its locks are gone: the keys it held are free for this process's next acquire.
    for (const [key, held] of this.keys) if (held.session === session) this.keys.delete(key);
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
