// The etcd lock service (LOCK_BACKEND=etcd): a wallet's lock is the key `<prefix>wallet/<id>/lock`,
// valued with the owner id and attached to this process's lease; its fencing token is the key's
// create revision.
//
// One lease per process, not one per wallet: one keep-alive stream and one keep-alive per third
// of a TTL for the whole process, however many wallets it holds. A lease lost loses all of the
// process's wallets at once, which is what a dead process means anyway. The lease is granted
// with TTL ceil(lockTtlMs / 1000) s (etcd counts whole seconds, so lockTtlMs ≥ 2000); once lost
// (revoked, expired, a keep-alive answered TTL 0) a new one serves later acquires, and every
// wallet held under the old one renews false.
//
// The watchdog trusts only acknowledged keep-alives, never the client's state: renew() is true
// only when a keep-alive SENT at or after renew() was called is answered with TTL > 0. One
// keep-alive is in flight at a time; a renew arriving while one flies waits for the next one,
// since the one in flight left before it asked. Each wallet's lease is measured from the send of
// the last acknowledged keep-alive: startedAtMs = min(acquire sent, lastAckedSentAtMs + lease TTL
// − lockTtlMs), so the watchdog never trusts the lease longer than etcd keeps it.
//
// The token is the lock key's create revision (the acquire transaction's revision): it grows
// with every write to the cluster, so a later holder's key was created at a greater revision.
// A key's version restarts at 1 each time it is created, its mod revision moves when the holder
// writes it again, and a lease id is random: none of them orders holders. A release deletes only
// the key created at our revision with our owner id, so a late or retried release can never
// delete a newer holder's key. etcd cannot raise a revision per wallet: a fence above the
// cluster's revision means the cluster was rebuilt from nothing, and only a new lock epoch helps.
import { readFileSync } from 'node:fs';
import {
  Etcd3,
  EtcdLeaseInvalidError,
  type IDuplexStream,
  type ILeaseKeepAliveRequest,
  type ILeaseKeepAliveResponse,
  type IOptions,
  type ITxnResponse,
} from 'etcd3';
import { wholeNumberIn } from '../config/bounds.ts';
import { ETCD_LOCK_TTL_MS_MIN } from '../config/config.ts';
import { SETTINGS } from '../config/settings.ts';
import type { ProbeResult } from '../ops/probes.ts';
import { assertKeyPrefix, assertWalletId } from './lock-keys.ts';
import {
  type AdvanceFenceResult,
  composeToken,
  LockService,
  type LockServiceOptions,
  RAW_TOKEN_MAX,
  type RawAcquire,
} from './lock-service.ts';

/** etcd grants leases in whole seconds, and refuses below its own minimum (2 s with a 1 s election timeout). */
export { ETCD_LOCK_TTL_MS_MIN };
export const ETCD_CALL_TIMEOUT_MS_DEFAULT = 2_000;
export const ETCD_DIAL_TIMEOUT_MS_DEFAULT = 5_000;
export const ETCD_TIMEOUT_MS_MAX = 60_000;
export const ETCD_ENDPOINTS_MAX = SETTINGS.ETCD_ENDPOINTS.itemsMax;
/** Keep-alives of the process lease per TTL when no watchdog asks (the Go client's third). */
const KEEPALIVES_PER_TTL = 3;
/** Keep-alives one renewal sends, each on a new stream after the one before failed. */
const KEEPALIVE_ATTEMPTS_MAX = 3;
/** An acquire first refreshes a lease whose last acknowledged keep-alive is older than this part of its TTL. */
const LEASE_STALE_FRACTION = 0.5;

export interface EtcdTlsOptions {
  /** PEM file of the CA that signed the members' certificates (required with certFile). */
  readonly caFile?: string;
  /** Client certificate and key (PEM files), for members that ask for one. */
  readonly certFile?: string;
  readonly keyFile?: string;
}

export interface EtcdLockOptions extends LockServiceOptions {
  /** Client URLs of the members (`http://host:port`, `https://` with TLS). */
  readonly endpoints: readonly string[];
  /** Prepended to every key (`ft:` gives `ft:wallet/w1/lock`), so tenants and tests do not collide. */
  readonly keyPrefix?: string;
  readonly tls?: EtcdTlsOptions;
  readonly auth?: { readonly username: string; readonly password: string };
  /** Bound on every call (and on a keep-alive's answer). @defaultValue ETCD_CALL_TIMEOUT_MS_DEFAULT */
  readonly callTimeoutMs?: number;
  /** Bound on the first lease grant (it dials) and the longest wait between reconnects. @defaultValue ETCD_DIAL_TIMEOUT_MS_DEFAULT */
  readonly dialTimeoutMs?: number;
}

/** The process lease as this process knows it. */
interface ProcessLease {
  /** etcd's lease id, a decimal int64. */
  readonly id: string;
  /** What etcd granted (it may raise a short TTL to its minimum). */
  readonly ttlMs: number;
  /** performance.now() when the last acknowledged keep-alive (or the grant) was sent. */
  lastAckedSentAtMs: number;
  lost: boolean;
}

/** A wallet this object holds: the key's create revision and the lease it is attached to. */
interface HeldKey {
  readonly walletId: string;
  readonly createRevision: bigint;
  readonly lease: ProcessLease;
}

/** One keep-alive in flight: when it was sent, for which lease, and its settling. */
interface KeepAliveFlight {
  readonly lease: ProcessLease;
  readonly sentAtMs: number;
  readonly acknowledged: Promise<void>;
}

type KeepAliveStream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

/** `work`, or a rejection naming `what` after timeoutMs. */
async function boundedMs<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`etcd: ${what} did not answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function credentialsOf(tls: EtcdTlsOptions | undefined): Pick<IOptions, 'credentials'> {
  if (tls === undefined || (tls.caFile === undefined && tls.certFile === undefined && tls.keyFile === undefined)) {
    return {};
  }
  if ((tls.certFile === undefined) !== (tls.keyFile === undefined)) {
    throw new RangeError('tls.certFile and tls.keyFile go together');
  }
  if (tls.caFile === undefined) throw new RangeError('tls.caFile is required with a client certificate');
  return {
    credentials: {
      rootCertificate: readFileSync(tls.caFile),
      ...(tls.keyFile === undefined ? {} : { privateKey: readFileSync(tls.keyFile) }),
      ...(tls.certFile === undefined ? {} : { certChain: readFileSync(tls.certFile) }),
    },
  };
}

function assertEndpoints(endpoints: readonly string[]): void {
  if (endpoints.length === 0 || endpoints.length > ETCD_ENDPOINTS_MAX) {
    throw new RangeError(`endpoints must list 1-${ETCD_ENDPOINTS_MAX} etcd client URLs, got ${endpoints.length}`);
  }
  for (const endpoint of endpoints) {
    if (!/^https?:\/\/[^/\s]+:\d+\/?$/.test(endpoint)) {
      throw new RangeError(`an etcd endpoint is http(s)://host:port, got ${JSON.stringify(endpoint)}`);
    }
  }
}

export class EtcdLock extends LockService {
  readonly backend = 'etcd' as const;
  readonly keyPrefix: string;
  readonly callTimeoutMs: number;
  readonly dialTimeoutMs: number;
  private readonly client: Etcd3;
  /** Wallets acquired through this object and not released: owner id → key. */
  private readonly keys = new Map<string, HeldKey>();
  private lease: ProcessLease | null = null;
  private granting: Promise<ProcessLease> | null = null;
  private flight: KeepAliveFlight | null = null;
  private stream: KeepAliveStream | null = null;
  /** Settles the keep-alive in flight from the stream's answer or failure. */
  private answer: { resolve: (reply: ILeaseKeepAliveResponse) => void; reject: (error: Error) => void } | null = null;
  private readonly keepAliveTimer: NodeJS.Timeout;
  private closed = false;

  constructor(options: EtcdLockOptions) {
    if (options.lockTtlMs < ETCD_LOCK_TTL_MS_MIN) {
      throw new RangeError(
        `lockTtlMs must be at least ${ETCD_LOCK_TTL_MS_MIN} for etcd (its leases count whole seconds), got ${options.lockTtlMs}`,
      );
    }
    super(options);
    this.keyPrefix = options.keyPrefix ?? '';
    assertKeyPrefix(this.keyPrefix);
    assertEndpoints(options.endpoints);
    this.callTimeoutMs = wholeNumberIn(
      'callTimeoutMs',
      options.callTimeoutMs ?? ETCD_CALL_TIMEOUT_MS_DEFAULT,
      1,
      ETCD_TIMEOUT_MS_MAX,
    );
    this.dialTimeoutMs = wholeNumberIn(
      'dialTimeoutMs',
      options.dialTimeoutMs ?? ETCD_DIAL_TIMEOUT_MS_DEFAULT,
      1,
      ETCD_TIMEOUT_MS_MAX,
    );
    this.client = new Etcd3({
      hosts: [...options.endpoints],
      ...credentialsOf(options.tls),
      ...(options.auth === undefined ? {} : { auth: { ...options.auth } }),
      // Streams (the keep-alives) are bounded per answer below; every other call by its deadline.
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + this.callTimeoutMs }),
      // A member restarted is dialled again within dialTimeoutMs, not after grpc's two minutes.
      grpcOptions: { 'grpc.max_reconnect_backoff_ms': this.dialTimeoutMs },
    });
    const intervalMs = Math.floor(this.lockTtlMs / KEEPALIVES_PER_TTL);
    this.keepAliveTimer = setInterval(() => this.keepAliveInBackground(), intervalMs);
    this.keepAliveTimer.unref();
  }

  /** `<prefix>wallet/<walletId>/lock`. */
  keyOf(walletId: string): string {
    assertWalletId(walletId);
    return `${this.keyPrefix}wallet/${walletId}/lock`;
  }

  protected async tryAcquire(walletId: string, owner: string): Promise<RawAcquire> {
    const key = this.keyOf(walletId);
    const lease = await this.freshLease();
    const sentAtMs = performance.now();
    const reply = await this.sendAcquire(walletId, key, owner, lease);
    let raw: bigint;
    if (reply.succeeded) {
      raw = BigInt(reply.header.revision);
    } else {
      const holder = reply.responses[0]?.response_range.kvs[0];
      // The client resent a transaction etcd had applied: the key is ours, created then.
      if (holder === undefined || holder.value.toString() !== owner) {
        return { kind: 'busy', retryAfterMs: this.lockTtlMs };
      }
      raw = BigInt(holder.create_revision);
    }
    if (raw > RAW_TOKEN_MAX) {
      await this.deleteOwned(key, owner, raw);
      throw new RangeError(`etcd's revision ${raw} is not below 2^53: open a new lock epoch on a fresh cluster`);
    }
    this.keys.set(owner, { walletId, createRevision: raw, lease });
    return {
      kind: 'acquired',
      raw,
      startedAtMs: Math.min(sentAtMs, lease.lastAckedSentAtMs + lease.ttlMs - this.lockTtlMs),
    };
  }

  /**
   * The create-if-absent transaction. One that failed (a timeout) may still have been applied:
   * nobody holds its owner id any more, so a delete guarded on that owner follows it, without
   * delaying the caller, and the wallet is given back instead of held by nobody for a TTL.
   */
  private async sendAcquire(walletId: string, key: string, owner: string, lease: ProcessLease): Promise<ITxnResponse> {
    const keyBytes = Buffer.from(key);
    try {
      return await this.call('acquire', (options) =>
        this.client.kv.txn(
          {
            compare: [{ key: keyBytes, target: 'Create', result: 'Equal', create_revision: 0 }],
            success: [{ request_put: { key: keyBytes, value: Buffer.from(owner), lease: lease.id } }],
            failure: [{ request_range: { key: keyBytes } }],
          },
          options,
        ),
      );
    } catch (err) {
      if (err instanceof EtcdLeaseInvalidError) this.markLost(lease, 'not_found');
      this.giveBack(walletId, keyBytes, owner);
      throw err;
    }
  }

  private giveBack(walletId: string, key: Buffer, owner: string): void {
    this.call('give back', (options) =>
      this.client.kv.txn(
        {
          compare: [{ key, target: 'Value', result: 'Equal', value: Buffer.from(owner) }],
          success: [{ request_delete_range: { key } }],
        },
        options,
      ),
    ).then(
      (reply) => {
        if (reply.succeeded) {
          this.logger.warn(
            { event: 'lock_acquire_given_back', backend: this.backend, walletId, owner },
            'an acquire that had failed ran after all; its lock is given back',
          );
        }
      },
      (err: unknown) => {
        this.logger.warn(
          { event: 'lock_acquire_give_back_failed', backend: this.backend, walletId, owner, err },
          'could not give back a lock a failed acquire may have taken; it expires with the lease',
        );
      },
    );
  }

  /**
   * True only when a keep-alive sent after this call began was acknowledged with TTL > 0 for the
   * lease the wallet's key is attached to. Throws when no keep-alive was answered (transient:
   * the watchdog retries, and its own deadline ends the lease).
   */
  async renew(walletId: string, owner: string): Promise<boolean> {
    const askedAtMs = performance.now();
    const held = this.keys.get(owner);
    if (held === undefined || held.walletId !== walletId || held.lease.lost) return false;
    await this.keepAliveRetried(held.lease, askedAtMs);
    return !held.lease.lost;
  }

  /**
   * A keep-alive that failed (a member killed, an election under way) is sent again at once on a
   * new stream, which the client opens to a member chosen at random: waiting for the watchdog's
   * next renewal would spend a third of the lease on one dead member.
   */
  private async keepAliveRetried(lease: ProcessLease, askedAtMs: number): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await this.keepAliveSentAfter(lease, askedAtMs);
        return;
      } catch (err) {
        if (attempt >= KEEPALIVE_ATTEMPTS_MAX || this.closed) throw err;
      }
    }
  }

  protected async releaseOwned(walletId: string, owner: string): Promise<boolean> {
    const held = this.keys.get(owner);
    if (held === undefined || held.walletId !== walletId) return false;
    const released = await this.deleteOwned(this.keyOf(walletId), owner, held.createRevision);
    this.keys.delete(owner);
    return released;
  }

  /** Deletes the key only if it was created at `createRevision` and holds `owner`. */
  private async deleteOwned(key: string, owner: string, createRevision: bigint): Promise<boolean> {
    const keyBytes = Buffer.from(key);
    const reply = await this.call('release', (options) =>
      this.client.kv.txn(
        {
          compare: [
            { key: keyBytes, target: 'Create', result: 'Equal', create_revision: createRevision.toString() },
            { key: keyBytes, target: 'Value', result: 'Equal', value: Buffer.from(owner) },
          ],
          success: [{ request_delete_range: { key: keyBytes } }],
        },
        options,
      ),
    );
    return reply.succeeded;
  }

  /**
   * etcd's revision is the cluster's, not the wallet's: at or below it, the next acquire's create
   * revision is above `raw` already; above it, the cluster was rebuilt from nothing.
   */
  protected async raiseRaw(walletId: string, raw: bigint): Promise<AdvanceFenceResult> {
    const key = Buffer.from(this.keyOf(walletId));
    const reply = await this.call('revision', (options) => this.client.kv.range({ key, count_only: true }, options));
    const current = BigInt(reply.header.revision);
    const fence = composeToken(this.epoch, current > RAW_TOKEN_MAX ? RAW_TOKEN_MAX : current);
    return { kind: raw <= current ? 'unchanged' : 'behind', fence };
  }

  /** A linearizable read: it needs a quorum, so a cluster without one makes the worker not ready. */
  async probe(timeoutMs: number): Promise<ProbeResult> {
    try {
      const key = Buffer.from(`${this.keyPrefix}probe`);
      await boundedMs(
        this.client.kv.range({ key, count_only: true, serializable: false }, { deadline: Date.now() + timeoutMs }),
        timeoutMs,
        'a linearizable read',
      );
      return { ok: true };
    } catch (err) {
      return { ok: false, variable: 'ETCD_ENDPOINTS', detail: `the lock's etcd: ${(err as Error).message}` };
    }
  }

  /** Revokes the process lease (bounded; its keys go with it) and closes the client. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.keepAliveTimer);
    const lease = this.lease;
    this.lease = null;
    if (lease !== null && !lease.lost) {
      lease.lost = true;
      await this.call('revoke', (options) => this.client.leaseClient.leaseRevoke({ ID: lease.id }, options)).catch(
        (err: unknown) => {
          this.logger.warn(
            { event: 'lock_lease_revoke_failed', backend: this.backend, leaseId: lease.id, err },
            'could not revoke the lease; its keys expire with it',
          );
        },
      );
    }
    this.endStream(new Error('the etcd lock is closed'));
    this.client.close();
  }

  /** etcd's id of the process lease now in use (null before the first acquire, or after it was lost). */
  get leaseId(): string | null {
    return this.lease?.id ?? null;
  }

  /** One bounded call: the deadline each attempt carries, and a hard bound on the client's retries. */
  private call<T>(what: string, run: (options: { deadline: number }) => Promise<T>): Promise<T> {
    return boundedMs(run({ deadline: Date.now() + this.callTimeoutMs }), this.callTimeoutMs, what);
  }

  /**
   * The live process lease for an acquire: granted when there is none (or it was lost), and
   * kept alive first when its last acknowledged keep-alive is old, so the new key's lease is
   * measured from a recent acknowledgement.
   */
  private async freshLease(): Promise<ProcessLease> {
    if (this.closed) throw new Error('the etcd lock is closed');
    let lease = this.lease ?? (await this.grant());
    if (performance.now() - lease.lastAckedSentAtMs > lease.ttlMs * LEASE_STALE_FRACTION) {
      await this.keepAliveRetried(lease, performance.now());
      if (lease.lost) lease = await this.grant();
    }
    return lease;
  }

  /** One grant at a time, however many acquires wait for it. */
  private grant(): Promise<ProcessLease> {
    if (this.granting !== null) return this.granting;
    const ttlSeconds = Math.ceil(this.lockTtlMs / 1000);
    const sentAtMs = performance.now();
    const granting = boundedMs(
      this.client.leaseClient.leaseGrant({ TTL: ttlSeconds }, { deadline: Date.now() + this.dialTimeoutMs }),
      this.dialTimeoutMs,
      'lease grant',
    ).then((reply) => {
      const lease: ProcessLease = {
        id: reply.ID,
        ttlMs: Number(reply.TTL) * 1000,
        lastAckedSentAtMs: sentAtMs,
        lost: false,
      };
      if (this.closed) throw new Error('the etcd lock is closed');
      this.lease = lease;
      this.logger.info(
        { event: 'lock_lease_granted', backend: this.backend, leaseId: lease.id, ttlMs: lease.ttlMs },
        'etcd lease granted',
      );
      return lease;
    });
    this.granting = granting;
    void granting
      .finally(() => {
        if (this.granting === granting) this.granting = null;
      })
      .catch(() => undefined);
    return granting;
  }

  /** The process lease is gone: its wallets renew false from now on, and the next acquire grants another. */
  private markLost(lease: ProcessLease, reason: 'expired' | 'not_found'): void {
    if (lease.lost) return;
    lease.lost = true;
    if (this.lease === lease) this.lease = null;
    const wallets = [...this.keys.values()].filter((held) => held.lease === lease).length;
    this.logger.error(
      { event: 'lock_lease_lost', backend: this.backend, leaseId: lease.id, reason, wallets },
      'the etcd lease is lost: every wallet held under it is lost',
    );
  }

  /**
   * Resolves once a keep-alive of `lease` sent at or after askedAtMs was answered (the lease is
   * then alive, or marked lost); rejects when that keep-alive failed or was not answered in time.
   */
  private async keepAliveSentAfter(lease: ProcessLease, askedAtMs: number): Promise<void> {
    for (;;) {
      if (lease.lost) return;
      const flight = this.flight;
      if (flight === null) return this.startKeepAlive(lease).acknowledged;
      // Sent before this caller asked: it proves nothing about the lease after the ask.
      if (flight.lease === lease && flight.sentAtMs >= askedAtMs) return flight.acknowledged;
      await flight.acknowledged.catch(() => undefined);
    }
  }

  private startKeepAlive(lease: ProcessLease): KeepAliveFlight {
    const sentAtMs = performance.now();
    const acknowledged = boundedMs(this.exchange(lease.id), this.callTimeoutMs, 'keep-alive').then(
      (reply) => {
        if (Number(reply.TTL) <= 0) {
          this.markLost(lease, 'expired');
          return;
        }
        lease.lastAckedSentAtMs = Math.max(lease.lastAckedSentAtMs, sentAtMs);
      },
      (err: unknown) => {
        // A stream that did not answer may answer late: the next keep-alive starts on a new one.
        this.endStream(err instanceof Error ? err : new Error(String(err)));
        this.logger.warn(
          {
            event: 'lock_keepalive_failed',
            backend: this.backend,
            leaseId: lease.id,
            err,
            sinceAckMs: Math.round(performance.now() - lease.lastAckedSentAtMs),
          },
          'etcd keep-alive failed',
        );
        throw err;
      },
    );
    const flight: KeepAliveFlight = { lease, sentAtMs, acknowledged };
    this.flight = flight;
    void acknowledged
      .finally(() => {
        if (this.flight === flight) this.flight = null;
      })
      .catch(() => undefined);
    return flight;
  }

  /** Writes one keep-alive on the process's stream (opened when there is none) and waits for its answer. */
  private async exchange(leaseId: string): Promise<ILeaseKeepAliveResponse> {
    const stream = this.stream ?? (await this.openStream());
    return new Promise<ILeaseKeepAliveResponse>((resolve, reject) => {
      this.answer = { resolve, reject };
      stream.write({ ID: leaseId });
    });
  }

  private async openStream(): Promise<KeepAliveStream> {
    const stream = await this.client.leaseClient.leaseKeepAlive();
    if (this.closed) {
      stream.cancel();
      throw new Error('the etcd lock is closed');
    }
    this.stream = stream;
    stream.on('data', (reply) => {
      // A late answer on a stream already dropped belongs to no keep-alive waiting now.
      if (this.stream !== stream) return;
      const answer = this.answer;
      this.answer = null;
      answer?.resolve(reply);
    });
    stream.on('error', (err) => {
      if (this.stream === stream) this.endStream(err);
    });
    stream.on('end', () => {
      if (this.stream === stream) this.endStream(new Error('the keep-alive stream ended'));
    });
    return stream;
  }

  /** Drops the keep-alive stream; a keep-alive waiting on it fails with `error`. */
  private endStream(error: Error): void {
    const stream = this.stream;
    this.stream = null;
    const answer = this.answer;
    this.answer = null;
    answer?.reject(error);
    stream?.cancel();
  }

  /** Keeps the process lease alive while no watchdog asks (no wallet held, or between renewals). */
  private keepAliveInBackground(): void {
    const lease = this.lease;
    if (lease === null || lease.lost || this.flight !== null) return;
    this.keepAliveSentAfter(lease, performance.now()).catch(() => undefined);
  }
}
