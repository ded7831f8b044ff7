// ioredis connections for the two kinds of use: BullMQ's (blocking commands, must retry
// forever) and the lock's (every command bounded, so an unreachable Redis fails a job fast).
import { Redis } from 'ioredis';

/** A lock command that has not answered in this long has failed (the watchdog has its own bound). */
export const LOCK_COMMAND_TIMEOUT_MS = 2_000;

export function bullmqConnection(redisUrl: string): Redis {
  // BullMQ requires maxRetriesPerRequest: null on connections used by workers.
  return new Redis(redisUrl, { maxRetriesPerRequest: null, enableReadyCheck: true });
}

export function lockConnection(redisUrl: string): Redis {
  return new Redis(redisUrl, {
    maxRetriesPerRequest: 1,
    commandTimeout: LOCK_COMMAND_TIMEOUT_MS,
    enableOfflineQueue: true,
    // The lock commands of the jobs a worker holds at once (acquires, releases, renewals) leave
    // in one write per event-loop turn instead of one each; order on the connection is kept.
    enableAutoPipelining: true,
  });
}
