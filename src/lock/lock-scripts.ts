// The boundary to the Lua scripts in lua/: reads each file once, registers it on an ioredis
// client with defineCommand (EVALSHA, falling back to EVAL on NOSCRIPT), and turns replies
// into typed values, refusing anything the scripts' headers do not allow.
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { LockProtocolError } from './lock-errors.ts';
import type { LockKeys } from './lock-keys.ts';

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

const LUA_DIRECTORY = new URL('../../lua/', import.meta.url);

interface ScriptSpec {
  /** Name of the method defineCommand adds to the client; prefixed to avoid clashing with other scripts. */
  readonly commandName: string;
  readonly fileName: string;
  readonly numberOfKeys: number;
}

const SCRIPT_SPECS = {
  acquire: { commandName: 'fencedLockAcquire', fileName: 'acquire.lua', numberOfKeys: 2 },
  renew: { commandName: 'fencedLockRenew', fileName: 'renew.lua', numberOfKeys: 1 },
  release: { commandName: 'fencedLockRelease', fileName: 'release.lua', numberOfKeys: 1 },
  advanceFence: { commandName: 'fencedLockAdvanceFence', fileName: 'advance-fence.lua', numberOfKeys: 1 },
} as const satisfies Record<string, ScriptSpec>;

type ScriptName = keyof typeof SCRIPT_SPECS;

const luaSources = new Map<ScriptName, string>();

function luaSourceOf(name: ScriptName): string {
  let source = luaSources.get(name);
  if (source === undefined) {
    source = readFileSync(new URL(SCRIPT_SPECS[name].fileName, LUA_DIRECTORY), 'utf8');
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

type ScriptCall = (...keysThenArgs: string[]) => Promise<unknown>;

/** Registers the scripts on `redis` (idempotent: the same name and source again is harmless). */
export function loadLockScripts(redis: LockRedisClient): LockScripts {
  const call = (name: ScriptName): ScriptCall => {
    const spec = SCRIPT_SPECS[name];
    redis.defineCommand(spec.commandName, { numberOfKeys: spec.numberOfKeys, lua: luaSourceOf(name) });
    // defineCommand adds the method at run time, so the client's type does not know it.
    const method: unknown = Reflect.get(redis, spec.commandName);
    if (typeof method !== 'function') throw new LockProtocolError(name, 'defineCommand added no method');
    return (...keysThenArgs) => Promise.resolve<unknown>(method.apply(redis, keysThenArgs));
  };
  const acquireCall = call('acquire');
  const renewCall = call('renew');
  const releaseCall = call('release');
  const advanceFenceCall = call('advanceFence');

  return {
    async acquire(keys, owner, lockTtlMs) {
      return parseAcquireReply(await acquireCall(keys.lockKey, keys.fenceKey, owner, String(lockTtlMs)));
    },
    async renew(keys, owner, lockTtlMs) {
      return parseFlagReply('renew', await renewCall(keys.lockKey, owner, String(lockTtlMs)));
    },
    async release(keys, owner) {
      return parseFlagReply('release', await releaseCall(keys.lockKey, owner));
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

function parseAcquireReply(reply: unknown): AcquireReply {
  if (Array.isArray(reply) && reply.length === 2) {
    const [status, detail]: unknown[] = reply;
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
