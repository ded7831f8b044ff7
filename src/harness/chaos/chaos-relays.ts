// The relay processes of an intake chaos run: `npm run relay` (src/cli/relay-cli.ts), as many as
// --relays, started with the run's queue and database and a short INTAKE_RESEND_AFTER_MS, so
// that the adds a lossy failover loses are sent again within the run. They reach Redis and PostgreSQL straight (not
// through the workers' fault proxies): on a queue shard's lossy failover they stay on the old
// master's side with the producers, so what they add there meanwhile is lost.
import { join } from 'node:path';
import { redisTargetEnv } from '../../config/config.ts';
import { PROJECT_ROOT } from '../../config/paths.ts';
import { WorkerProcess } from '../fleet/worker-processes.ts';
import { CHAOS_JOB_ATTEMPTS_MAX, type FleetNames } from './chaos-fleet.ts';
import type { ChaosOptions } from './chaos-options.ts';
import type { ChaosServices } from './chaos-services.ts';

export const RELAY_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'relay-cli.ts');
/** Requests a relay claims per batch in a chaos run. */
export const CHAOS_RELAY_BATCH_MAX = 200;
/** Its rest after a round that found nothing: short, as the producer sends every 100 ms. */
export const CHAOS_RELAY_IDLE_MS = 50;

export class ChaosRelays {
  private constructor(readonly processes: readonly WorkerProcess[]) {}

  static create(options: ChaosOptions, services: ChaosServices, names: FleetNames, logDir: string): ChaosRelays {
    const env: Record<string, string> = {
      DATABASE_URL: services.databaseUrl,
      ...redisTargetEnv(services.redisTarget),
      QUEUE_NAME: names.queueName,
      QUEUE_SHARDS: String(options.queueShards),
      LOCK_KEY_PREFIX: names.lockKeyPrefix,
      JOB_ATTEMPTS_MAX: String(CHAOS_JOB_ATTEMPTS_MAX),
      INTAKE_RESEND_AFTER_MS: String(options.resendAfterMs),
      RELAY_BATCH_MAX: String(CHAOS_RELAY_BATCH_MAX),
      RELAY_IDLE_MS: String(CHAOS_RELAY_IDLE_MS),
      // Any free port, reported over IPC like the workers' (never one picked in advance).
      RELAY_METRICS_PORT: '0',
      LOG_LEVEL: 'info',
    };
    return new ChaosRelays(
      Array.from({ length: options.relays }, (_, i) => new WorkerProcess(i + 1, { env, logDir, entry: RELAY_ENTRY })),
    );
  }

  relay(index: number): WorkerProcess {
    const r = this.processes[index - 1];
    if (r === undefined) throw new RangeError(`no relay ${index}`);
    return r;
  }

  startAll(): void {
    for (const r of this.processes) r.start();
  }

  /** Every relay running again (the end of the fault phase). */
  healAll(): void {
    for (const r of this.processes) if (!r.running) r.start();
  }

  pids(): number[] {
    return this.processes.map((r) => r.pid).filter((p): p is number => p !== undefined);
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.processes.map((r) => r.stop()));
  }
}
