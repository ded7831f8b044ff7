// The boundary to the Lua scripts in lua/: reads each file once, registers it on an ioredis
// client with defineCommand (EVALSHA, falling back to EVAL on NOSCRIPT), and turns replies
// into typed values, refusing anything the scripts' headers do not allow. On a single server,
// the acquisitions asked for in one event-loop turn go out as one acquire call, and the
// releases as one release call (the wallets of a batch: one round trip and one script run
// instead of one each); in a cluster every call holds one wallet, whose keys share a slot.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Cluster, type Redis, ReplyError } from 'ioredis';
import { PROJECT_ROOT } from '../config/paths.ts';
import { LockProtocolError } from '../errors.ts';
import type { LockKeys } from './lock-keys.ts';
import { flushEachTurn, LOCK_CALL_WALLETS_MAX, TurnGatherer } from './turn-gatherer.ts';

/** A single server or a cluster: every script touches keys of one hash slot only. */
export type LockRedisClient = Redis | Cluster;

/**
 * Tokens travel as decimal strings from Lua and as bigint in TypeScript, never as JS numbers.
 * Redis counters are signed 64-bit, so a token has at most 19 digits.
 */
const TOKEN_PATTERN = /^(0|[1-9][0-9]{0,18})$/;

/**
 * advance-fence compares in Lua, where numbers are doubles: exact for integers below 2^53.
 * At a million acquisitions a second that is 285 years of tokens.
 */
export const FENCE_TARGET_MAX = 2n ** 53n - 1n;

const LUA_DIRECTORY = join(PROJECT_ROOT, 'lua');

interface ScriptSpec {
  /** Name of the method defineCommand adds to the client; prefixed to avoid clashing with other scripts. */
  readonly commandName: string;
  readonly fileName: string;
  /** Null: the caller passes the key count first (a script over any number of wallets). */
  readonly numberOfKeys: number | null;
}

/** Keys per wallet in an acquire call: the lock key and the fence key. */
const ACQUIRE_KEYS_PER_WALLET = 2;

export { LOCK_CALL_WALLETS_MAX };

const SCRIPT_SPECS = {
  // acquire and release take any number of wallets: the key count goes first in each call.
  acquire: { commandName: 'fencedLockAcquire', fileName: 'acquire.lua', numberOfKeys: null },
  renew: { commandName: 'fencedLockRenew', fileName: 'renew.lua', numberOfKeys: 1 },
  release: { commandName: 'fencedLockRelease', fileName: 'release.lua', numberOfKeys: null },
  advanceFence: { commandName: 'fencedLockAdvanceFence', fileName: 'advance-fence.lua', numberOfKeys: 1 },
} as const satisfies Record<string, ScriptSpec>;

type ScriptName = keyof typeof SCRIPT_SPECS;

const luaSources = new Map<ScriptName, string>();

function luaSourceOf(name: ScriptName): string {
  let source = luaSources.get(name);
  if (source === undefined) {
    source = readFileSync(join(LUA_DIRECTORY, SCRIPT_SPECS[name].fileName), 'utf8');
    luaSources.set(name, source);
  }
  return source;
}

export type AcquireReply =
  | { readonly kind: 'ok'; readonly token: bigint }
  | { readonly kind: 'busy'; readonly pttlMs: number };

export interface AdvanceFenceReply {
  readonly kind: 'raised' | 'unchanged';
  /** The counter after the call; the next acquire issues fence + 1. */
  readonly fence: bigint;
}

/** Typed calls of the four scripts on one client. */
export interface LockScripts {
  acquire(keys: LockKeys, owner: string, lockTtlMs: number): Promise<AcquireReply>;
  renew(keys: LockKeys, owner: string, lockTtlMs: number): Promise<boolean>;
  release(keys: LockKeys, owner: string): Promise<boolean>;
  advanceFence(keys: LockKeys, atLeast: bigint): Promise<AdvanceFenceReply>;
}

type ScriptCall = (...keysThenArgs: (string | number)[]) => Promise<unknown>;

interface AcquireItem {
  readonly keys: LockKeys;
  readonly owner: string;
  readonly lockTtlMs: number;
}

interface ReleaseItem {
  readonly keys: LockKeys;
  readonly owner: string;
}

/** Registers the scripts on `redis` (idempotent: the same name and source again is harmless). */
export function loadLockScripts(redis: LockRedisClient): LockScripts {
  const call = (name: ScriptName): ScriptCall => {
    const spec = SCRIPT_SPECS[name];
    redis.defineCommand(spec.commandName, {
      ...(spec.numberOfKeys === null ? {} : { numberOfKeys: spec.numberOfKeys }),
      lua: luaSourceOf(name),
    });
    // defineCommand adds the method at run time, so the client's type does not know it.
    const method: unknown = Reflect.get(redis, spec.commandName);
    if (typeof method !== 'function') throw new LockProtocolError(name, 'defineCommand added no method');
    return (...keysThenArgs) => Promise.resolve<unknown>(method.apply(redis, keysThenArgs));
  };
  const acquireCall = call('acquire');
  const renewCall = call('renew');
  const releaseCall = call('release');
  const advanceFenceCall = call('advanceFence');

  const sendAcquires = async (items: readonly AcquireItem[]): Promise<(AcquireReply | Error)[]> => {
    const keys = items.flatMap((a) => [a.keys.lockKey, a.keys.fenceKey]);
    const args = items.flatMap((a) => [a.owner, String(a.lockTtlMs)]);
    const reply = await acquireCall(items.length * ACQUIRE_KEYS_PER_WALLET, ...keys, ...args);
    return entriesOf('acquire', reply, items.length).map(parseAcquireEntry);
  };
  const sendReleases = async (items: readonly ReleaseItem[]): Promise<boolean[]> => {
    const reply = await releaseCall(items.length, ...items.map((r) => r.keys.lockKey), ...items.map((r) => r.owner));
    return entriesOf('release', reply, items.length).map((entry) => parseFlagReply('release', entry));
  };
  // In a cluster the wallets of a turn live in different slots (and nodes): one call each.
  const cluster = (redis as Cluster).isCluster === true;
  // One flush per turn, releases first: a wallet given back and taken again in the same turn
  // is given back first on the connection, as when each call went out on its own in order.
  const schedule = flushEachTurn(() => {
    releases.flush();
    acquires.flush();
  });
  const acquires = new TurnGatherer<AcquireItem, AcquireReply | Error>(sendAcquires, schedule, !cluster);
  const releases = new TurnGatherer<ReleaseItem, boolean>(sendReleases, schedule, !cluster);

  return {
    async acquire(keys, owner, lockTtlMs) {
      const reply = await acquires.call({ keys, owner, lockTtlMs });
      if (reply instanceof Error) throw reply;
      return reply;
    },
    async renew(keys, owner, lockTtlMs) {
      return parseFlagReply('renew', await renewCall(keys.lockKey, owner, String(lockTtlMs)));
    },
    async release(keys, owner) {
      return releases.call({ keys, owner });
    },
    async advanceFence(keys, atLeast) {
      if (atLeast < 0n || atLeast > FENCE_TARGET_MAX) {
        throw new RangeError(`advanceFence: atLeast must be in [0, 2^53), got ${atLeast}`);
      }
      return parseAdvanceFenceReply(await advanceFenceCall(keys.fenceKey, atLeast.toString()));
    },
  };
}

/** A fencing token as Lua sent it: a decimal string, converted with BigInt so no digit is lost. */
export function parseToken(script: string, value: unknown): bigint {
  if (typeof value !== 'string' || !TOKEN_PATTERN.test(value)) {
    throw new LockProtocolError(script, `expected a token as a decimal string, got ${describe(value)}`);
  }
  return BigInt(value);
}

/** A multi-wallet script's reply: exactly one entry per wallet sent. */
function entriesOf(script: string, reply: unknown, count: number): unknown[] {
  if (!Array.isArray(reply) || reply.length !== count) {
    throw new LockProtocolError(script, `expected ${count} entries, got ${describe(reply)}`);
  }
  return reply;
}

/** One wallet's entry of an acquire reply; its error entry (a corrupt fence counter) as the error Redis gave. */
function parseAcquireEntry(reply: unknown): AcquireReply | Error {
  if (Array.isArray(reply) && reply.length === 2) {
    const [status, detail]: unknown[] = reply;
    if (status === 'error' && typeof detail === 'string') return new ReplyError(detail) as Error;
    if (status === 'ok') {
      const token = parseToken('acquire', detail);
      if (token < 1n) throw new LockProtocolError('acquire', `a token must be >= 1, got ${token}`);
      return { kind: 'ok', token };
    }
    if (status === 'busy' && typeof detail === 'number' && Number.isSafeInteger(detail)) {
      return { kind: 'busy', pttlMs: detail };
    }
  }
  throw new LockProtocolError('acquire', `unexpected reply ${describe(reply)}`);
}

function parseFlagReply(script: string, reply: unknown): boolean {
  if (reply === 1) return true;
  if (reply === 0) return false;
  throw new LockProtocolError(script, `expected 0 or 1, got ${describe(reply)}`);
}

function parseAdvanceFenceReply(reply: unknown): AdvanceFenceReply {
  if (Array.isArray(reply) && reply.length === 2) {
    const [status, fence]: unknown[] = reply;
    if (status === 'raised' || status === 'unchanged') {
      return { kind: status, fence: parseToken('advance-fence', fence) };
    }
  }
  throw new LockProtocolError('advance-fence', `unexpected reply ${describe(reply)}`);
}

function describe(value: unknown): string {
  try {
    return JSON.stringify(value) ?? typeof value;
  } catch {
    return typeof value;
  }
}
