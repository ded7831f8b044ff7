// The lock service of LOCK_BACKEND, built from the configuration: Redis on the worker's lock
// connection (the default), etcd, or PostgreSQL advisory locks. Whatever is built, the worker
// above sees a LockService and the epoch it issues tokens in.
import type { Config } from '../config/config.ts';
import type { Logger } from '../log/logger.ts';
import { EtcdLock, type EtcdTlsOptions } from './etcd-lock.ts';
import { FencedLock } from './fenced-lock.ts';
import type { LockRedisClient } from './lock-scripts.ts';
import type { LockService } from './lock-service.ts';
import { PostgresLock } from './postgres-lock.ts';

export interface LockServiceContext {
  /** The Redis client the Redis lock service sends its scripts through (the caller owns it). */
  readonly redis: LockRedisClient;
  readonly logger: Logger;
  readonly ownerPrefix?: string;
  /** The lock epoch in force (lock-epochs.ts); 0 until the worker has read it. */
  readonly epoch?: number;
}

export function createLockService(
  config: Pick<Config, 'lock' | 'lockTtlMs' | 'lockKeyPrefix'>,
  context: LockServiceContext,
): LockService {
  const common = {
    lockTtlMs: config.lockTtlMs,
    keyPrefix: config.lockKeyPrefix,
    logger: context.logger,
    ...(context.ownerPrefix === undefined ? {} : { ownerPrefix: context.ownerPrefix }),
    ...(context.epoch === undefined ? {} : { epoch: context.epoch }),
  };
  const lock = config.lock;
  switch (lock.backend) {
    case 'redis':
      return new FencedLock({ ...common, redis: context.redis });
    case 'postgres':
      return new PostgresLock({ ...common, connectionString: lock.databaseUrl });
    case 'etcd':
      return new EtcdLock({
        ...common,
        endpoints: lock.endpoints,
        ...(lock.tls === null ? {} : { tls: tlsFiles(lock.tls) }),
        ...(lock.auth === null ? {} : { auth: lock.auth }),
      });
  }
}

/** The configuration's TLS files (null: unset) as EtcdLock's options (absent: unset). */
function tlsFiles(tls: { caFile: string | null; certFile: string | null; keyFile: string | null }): EtcdTlsOptions {
  return {
    ...(tls.caFile === null ? {} : { caFile: tls.caFile }),
    ...(tls.certFile === null ? {} : { certFile: tls.certFile }),
    ...(tls.keyFile === null ? {} : { keyFile: tls.keyFile }),
  };
}
