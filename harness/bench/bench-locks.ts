// The lock services of `--lock` (docs/verification/bench.md): Redis, the bench's own server and
// the worker's default, nothing to start; etcd, a private cluster of ETCD_MEMBERS_DEFAULT members
// on loopback (harness/services/local-etcd-cluster.ts) started once for the whole bench; and
// PostgreSQL, the case's own database reached directly, never through a pooler. For each case it
// gives the workers every lock variable (so the bench's own environment cannot leak another
// service's), opens the database's lock epoch for a service other than Redis (a fresh database
// starts in Redis's epoch 0, and a worker refuses an epoch not its own), and names the etcd
// members' processes for the CPU account.
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { type Config, ETCD_LOCK_TTL_MS_MIN } from '../../src/config/config.ts';
import { openLockEpoch, type Queryable } from '../../src/lock/lock-epochs.ts';
import type { LockBackendName } from '../../src/lock/lock-service.ts';
import {
  ETCD_BINARY,
  ETCD_ELECTION_TIMEOUT_MS_DEFAULT,
  ETCD_HEARTBEAT_INTERVAL_MS_DEFAULT,
  ETCD_MEMBERS_DEFAULT,
  type LocalEtcdCluster,
  startTempEtcdCluster,
} from '../services/local-etcd-cluster.ts';

/**
 * Revisions the bench's etcd keeps (revision-mode auto compaction), as a deployment compacts:
 * every acquire and release is a revision, and a full bench makes hundreds of thousands.
 */
export const BENCH_ETCD_REVISIONS_KEPT = 10_000;

/** Every variable of a lock service the worker reads (src/config/settings.ts). */
const LOCK_VARIABLES = [
  'LOCK_BACKEND',
  'ETCD_ENDPOINTS',
  'ETCD_TLS_CA_FILE',
  'ETCD_TLS_CERT_FILE',
  'ETCD_TLS_KEY_FILE',
  'ETCD_USERNAME',
  'ETCD_PASSWORD',
  'LOCK_DATABASE_URL',
] as const;

/** Why the listed services cannot run with this configuration, or null (checked before anything is measured). */
export function lockProblem(locks: readonly LockBackendName[], config: Config): string | null {
  if (locks.includes('etcd') && !existsSync(ETCD_BINARY))
    return `--lock etcd runs a private etcd cluster from ${ETCD_BINARY}, which is missing`;
  if (locks.includes('etcd') && config.lockTtlMs < ETCD_LOCK_TTL_MS_MIN)
    return `--lock etcd needs LOCK_TTL_MS of at least ${ETCD_LOCK_TTL_MS_MIN} (etcd leases are whole seconds), got ${config.lockTtlMs}`;
  if (locks.includes('postgres') && config.databasePooler === 'pgbouncer')
    return "--lock postgres holds its advisory locks on the bench's database directly: DATABASE_URL must reach PostgreSQL itself, not PgBouncer";
  return null;
}

export class BenchLocks {
  private constructor(private readonly etcd: LocalEtcdCluster | null) {}

  /** Starts what the services need: the etcd cluster when etcd is listed. */
  static async start(locks: readonly LockBackendName[]): Promise<BenchLocks> {
    if (!locks.includes('etcd')) return new BenchLocks(null);
    return new BenchLocks(
      await startTempEtcdCluster('bench', {
        members: ETCD_MEMBERS_DEFAULT,
        autoCompactionRevisions: BENCH_ETCD_REVISIONS_KEPT,
      }),
    );
  }

  /** No service to start: Redis only (the cases that take no lock, tests). */
  static none(): BenchLocks {
    return new BenchLocks(null);
  }

  private requireEtcd(): LocalEtcdCluster {
    if (this.etcd === null) throw new Error('no etcd cluster was started for this bench (etcd is not in --lock)');
    return this.etcd;
  }

  /** The lock variables of a worker of `lock` whose database is `databaseUrl`; every other one empty. */
  env(lock: LockBackendName, databaseUrl: string): Record<string, string> {
    const env: Record<string, string> = Object.fromEntries(LOCK_VARIABLES.map((name) => [name, '']));
    env.LOCK_BACKEND = lock;
    if (lock === 'etcd') env.ETCD_ENDPOINTS = this.requireEtcd().endpoints.join(',');
    if (lock === 'postgres') env.LOCK_DATABASE_URL = databaseUrl;
    return env;
  }

  /** The etcd members' processes while a case of `lock` runs (its CPU account's etcd part); none for another service. */
  etcdPids(lock: LockBackendName): () => readonly number[] {
    const etcd = lock === 'etcd' ? this.requireEtcd() : null;
    if (etcd === null) return () => [];
    return () => Array.from({ length: etcd.size }, (_, i) => etcd.pid(i)).filter((p): p is number => p !== undefined);
  }

  /** What the results file records of the services. */
  describe(): Record<string, unknown> {
    if (this.etcd === null) return { etcd: null };
    return {
      etcd: {
        members: this.etcd.size,
        heartbeatIntervalMs: ETCD_HEARTBEAT_INTERVAL_MS_DEFAULT,
        electionTimeoutMs: ETCD_ELECTION_TIMEOUT_MS_DEFAULT,
        autoCompactionRevisions: BENCH_ETCD_REVISIONS_KEPT,
        dataDirIn: tmpdir(),
      },
    };
  }

  async stop(): Promise<void> {
    await this.etcd?.stop();
  }
}

/**
 * Before a case's workers start: a fresh database is in Redis's epoch 0, so a service other than
 * Redis gets an epoch opened (as the database's owner, which the bench is).
 */
export async function openEpochFor(db: Queryable, lock: LockBackendName, note: string): Promise<void> {
  if (lock === 'redis') return;
  await openLockEpoch(db, lock, note);
}

/** A case's name in file names and progress lines: `e2e` on Redis (as before `--lock`), else `e2e-etcd`. */
export function lockedCaseLabel(caseName: string, lock: LockBackendName): string {
  return lock === 'redis' ? caseName : `${caseName}-${lock}`;
}
