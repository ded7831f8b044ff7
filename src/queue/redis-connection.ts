// ioredis connections for the two kinds of use: BullMQ's (blocking commands, must retry
// forever) and the lock's (every command bounded, so an unreachable Redis fails a job fast).
// A rediss:// URL speaks TLS and verifies the server's certificate (against REDIS_TLS_CA_FILE
// when given, else the system's CAs) and its host name; there is no switch to skip either.
import { readFileSync } from 'node:fs';
import { Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config/config.ts';
import { redactText } from '../log/redact.ts';

/** A lock command that has not answered in this long has failed (the watchdog has its own bound). */
export const LOCK_COMMAND_TIMEOUT_MS = 2_000;

/** Where Redis is and how to trust it. */
export type RedisEndpoint = Pick<Config, 'redisUrl' | 'redisTlsCaFile'>;

/** The TLS options for an endpoint: none for redis://, the CA file's certificates for rediss://. */
export function redisTlsOptions(endpoint: RedisEndpoint): Pick<RedisOptions, 'tls'> {
  if (new URL(endpoint.redisUrl).protocol !== 'rediss:') return {};
  return { tls: endpoint.redisTlsCaFile === null ? {} : { ca: readFileSync(endpoint.redisTlsCaFile) } };
}

/**
 * Without an 'error' listener ioredis prints the whole error object, and a refused AUTH
 * carries the password in `command.args`. This listener speaks only while no other one is
 * attached (callers with a logger attach theirs), with the message alone.
 */
function reportErrorsSafely(redis: Redis): Redis {
  redis.on('error', (err: Error) => {
    if (redis.listenerCount('error') > 1) return;
    process.stderr.write(`redis connection error: ${redactText(err.message)}\n`);
  });
  return redis;
}

export function bullmqConnection(endpoint: RedisEndpoint): Redis {
  // BullMQ requires maxRetriesPerRequest: null on connections used by workers.
  return reportErrorsSafely(new Redis(endpoint.redisUrl, { maxRetriesPerRequest: null, enableReadyCheck: true, ...redisTlsOptions(endpoint) }));
}

export function lockConnection(endpoint: RedisEndpoint): Redis {
  return reportErrorsSafely(new Redis(endpoint.redisUrl, {
    maxRetriesPerRequest: 1,
    commandTimeout: LOCK_COMMAND_TIMEOUT_MS,
    enableOfflineQueue: true,
    // The lock commands of the jobs a worker holds at once (acquires, releases, renewals) leave
    // in one write per event-loop turn instead of one each; order on the connection is kept.
    enableAutoPipelining: true,
    ...redisTlsOptions(endpoint),
  }));
}
