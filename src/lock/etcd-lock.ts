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
//
// A turn's acquisitions go out as one transaction of nested ones, each guarded on its own key
// (etcd ≥ 3.3), and so do its releases: one round trip and one entry of etcd's log for up to 100
// wallets (within etcd's default --max-txn-ops), instead of one each. The keys of one transaction share its
// revision as their create revision: tokens of different wallets may be equal, a wallet's still
// grow. A key this process holds or is acquiring is busy without a call.
//
// No key may outlive its holder on a live lease: one the process stopped tracking (an acquire
// whose answer was lost and whose give-back failed, a release that failed) would keep every
// process out of its wallet for as long as this one keeps the lease alive. So when a give-back
// or a release fails, the lease is given up (no more keep-alives) and etcd ends it, and every key
// on it, within its TTL; the process's other wallets go with it, and its next acquire grants anew.
import { readFileSync } from 'node:fs';
import {
  Etcd3,
  EtcdLeaseInvalidError,
  type IDuplexStream,
  type ILeaseKeepAliveRequest,
  type ILeaseKeepAliveResponse,
  type IOptions,
  type IRequestOp,
} from 'etcd3';
import { wholeNumberIn } from '../config/bounds.ts';
import { ETCD_LOCK_TTL_MS_MIN } from '../config/config.ts';
import { SETTINGS } from '../config/settings.ts';
import { type ProbeResult, withinMs } from '../ops/probes.ts';
import { assertKeyPrefix, assertWalletId } from './lock-keys.ts';
import {
  type AdvanceFenceResult,
  composeToken,
  LockService,
  type LockServiceOptions,
  RAW_TOKEN_MAX,
  type RawAcquire,
} from './lock-service.ts';
import { flushEachTurn, TurnGatherer } from './turn-gatherer.ts';

/** etcd grants leases in whole seconds, and refuses below its own minimum (2 s with a 1 s election timeout). */
export { ETCD_LOCK_TTL_MS_MIN };
export const ETCD_CALL_TIMEOUT_MS_DEFAULT = 2_000;
export const ETCD_DIAL_TIMEOUT_MS_DEFAULT = 5_000;
export const ETCD_TIMEOUT_MS_MAX = 60_000;
export const ETCD_ENDPOINTS_MAX = SETTINGS.ETCD_ENDPOINTS.itemsMax;
/**
 * Wallets in one transaction at most. etcd's --max-txn-ops (128 by default) bounds the outer
 * operations plus those of any one nested transaction (2 compares for a release): 100 leaves room.
 */
export const ETCD_TXN_WALLETS_MAX = 100;
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

/** One wallet's part of a turn's acquire transaction. */
interface AcquireItem {
  readonly walletId: string;
  readonly key: string;
  readonly owner: string;
  readonly lease: ProcessLease;
}

/** Its answer: the key's create revision (ours, or one a resent transaction created), or busy. */
type AcquireAnswer = { readonly created: bigint } | { readonly busy: true };

/** One wallet's part of a turn's release transaction. */
interface ReleaseItem {
  readonly key: string;
  readonly owner: string;
  readonly createRevision: bigint;
}

/** One keep-alive in flight: when it was sent, for which lease, and its settling. */
interface KeepAliveFlight {
  readonly lease: ProcessLease;
  readonly sentAtMs: number;
  readonly acknowledged: Promise<void>;
}

type KeepAliveStream = IDuplexStream<ILeaseKeepAliveRequest, ILeaseKeepAliveResponse>;

/** withinMs, its error naming etcd: `etcd: <what> did not answer within <n> ms`. */
function withinMsEtcd<T>(work: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  return withinMs(work, timeoutMs, `etcd: ${what}`);
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
  /**
   * The keys held (→ owner) or being acquired (→ null) by this process: one more acquire of them
   * is busy at once, so a turn's transaction never names a key twice (etcd refuses that).
   */
  private readonly taken = new Map<string, string | null>();
  private readonly acquires: TurnGatherer<AcquireItem, AcquireAnswer>;
  private readonly releases: TurnGatherer<ReleaseItem, boolean>;
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
    // One flush per turn, releases first: a wallet given back and taken again in one turn is given back first.
    const schedule = flushEachTurn(() => {
      this.releases.flush();
      this.acquires.flush();
    });
    this.acquires = new TurnGatherer((items) => this.sendAcquires(items), schedule, true, ETCD_TXN_WALLETS_MAX);
    this.releases = new TurnGatherer((items) => this.sendReleases(items), schedule, true, ETCD_TXN_WALLETS_MAX);
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
    if (this.taken.has(key)) return { kind: 'busy', retryAfterMs: this.lockTtlMs };
    this.taken.set(key, null);
    try {
      const lease = await this.freshLease();
      const sentAtMs = performance.now();
      const answer = await this.sendAcquire({ walletId, key, owner, lease });
      if ('busy' in answer) {
        this.taken.delete(key);
        return { kind: 'busy', retryAfterMs: this.lockTtlMs };
      }
      const raw = answer.created;
      if (raw > RAW_TOKEN_MAX) {
        await this.deleteOwned(key, owner, raw);
        throw new RangeError(`etcd's revision ${raw} is not below 2^53: open a new lock epoch on a fresh cluster`);
      }
      this.keys.set(owner, { walletId, createRevision: raw, lease });
      this.taken.set(key, owner);
      return {
        kind: 'acquired',
        raw,
        startedAtMs: Math.min(sentAtMs, lease.lastAckedSentAtMs + lease.ttlMs - this.lockTtlMs),
      };
    } catch (err) {
      this.taken.delete(key);
      throw err;
    }
  }

  /**
   * The create-if-absent transaction, gathered with the turn's others. One that failed (a timeout)
   * may still have been applied: nobody holds its owner id any more, so a delete guarded on that
   * owner follows it, without delaying the caller, and the wallet is given back instead of held by
   * nobody for a TTL.
   */
  private async sendAcquire(item: AcquireItem): Promise<AcquireAnswer> {
    try {
      return await this.acquires.call(item);
    } catch (err) {
      if (err instanceof EtcdLeaseInvalidError) this.markLost(item.lease, 'not_found');
      this.giveBack(item.walletId, Buffer.from(item.key), item.owner, item.lease);
      throw err;
    }
  }

  /** One transaction for a turn's acquisitions: per wallet, a nested one guarded on its key's absence. */
  private async sendAcquires(items: readonly AcquireItem[]): Promise<AcquireAnswer[]> {
    const success: IRequestOp[] = items.map((item) => {
      const key = Buffer.from(item.key);
      return {
        request_txn: {
          compare: [{ key, target: 'Create', result: 'Equal', create_revision: 0 }],
          success: [{ request_put: { key, value: Buffer.from(item.owner), lease: item.lease.id } }],
          failure: [{ request_range: { key } }],
        },
      };
    });
    const reply = await this.call('acquire', (options) => this.client.kv.txn({ compare: [], success }, options));
    const revision = BigInt(reply.header.revision);
    return items.map((item, i): AcquireAnswer => {
      const nested = reply.responses[i]?.response_txn;
      if (nested === undefined)
        throw new Error(`etcd answered ${reply.responses.length} of ${items.length} acquisitions`);
      if (nested.succeeded) return { created: revision };
      const holder = nested.responses[0]?.response_range.kvs[0];
      // The client resent a transaction etcd had applied: the key is ours, created then.
      if (holder !== undefined && holder.value.toString() === item.owner)
        return { created: BigInt(holder.create_revision) };
      return { busy: true };
    });
  }

  /** One transaction for a turn's releases: per wallet, a delete guarded on its create revision and owner. */
  private async sendReleases(items: readonly ReleaseItem[]): Promise<boolean[]> {
    const success: IRequestOp[] = items.map((item) => {
      const key = Buffer.from(item.key);
      return {
        request_txn: {
          compare: [
            { key, target: 'Create', result: 'Equal', create_revision: item.createRevision.toString() },
            { key, target: 'Value', result: 'Equal', value: Buffer.from(item.owner) },
          ],
          success: [{ request_delete_range: { key } }],
        },
      };
    });
    const reply = await this.call('release', (options) => this.client.kv.txn({ compare: [], success }, options));
    return items.map((_, i) => reply.responses[i]?.response_txn.succeeded === true);
  }

  private giveBack(walletId: string, key: Buffer, owner: string, lease: ProcessLease): void {
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
        // A key nobody holds, on a lease kept alive, would keep the wallet from every process for
        // as long as this one lives: the lease is given up (no more keep-alives), so etcd ends it,
        // and the key with it, within its TTL. The process's other wallets go with it.
        this.markLost(lease, 'give_back_failed');
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
    const key = this.keyOf(walletId);
    try {
      return await this.releases.call({ key, owner, createRevision: held.createRevision });
    } catch (err) {
      // The key may still be there, on a lease this process keeps alive, held by nobody: every
      // process would be kept out of the wallet for as long as this one lives. The lease is given
      // up instead (no more keep-alives): etcd ends it, and the key with it, within its TTL.
      this.markLost(held.lease, 'release_failed');
      throw err;
    } finally {
      // Released, refused or failed: the key is not this process's any more.
      this.keys.delete(owner);
      if (this.taken.get(key) === owner) this.taken.delete(key);
    }
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
      await withinMsEtcd(
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
    return withinMsEtcd(run({ deadline: Date.now() + this.callTimeoutMs }), this.callTimeoutMs, what);
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
    const granting = withinMsEtcd(
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
  private markLost(lease: ProcessLease, reason: 'expired' | 'not_found' | 'give_back_failed' | 'release_failed'): void {
    if (lease.lost) return;
    lease.lost = true;
    if (this.lease === lease) this.lease = null;
    const wallets = [...this.keys.values()].filter((held) => held.lease === lease).length;
    // Their keys went with the lease: this process may acquire them again.
    for (const [owner, held] of this.keys) {
      const key = this.keyOf(held.walletId);
      if (held.lease === lease && this.taken.get(key) === owner) this.taken.delete(key);
    }
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
    const acknowledged = withinMsEtcd(this.exchange(lease.id), this.callTimeoutMs, 'keep-alive').then(
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
