// The relay processes of an intake chaos run: `npm run relay` (src/cli/relay-cli.ts), as many as
// --relays, started with the run's queue and database and a short INTAKE_RESEND_AFTER_MS, so
// that the adds a lossy failover loses are sent again within the run. Each reaches Redis through
// a fault proxy of its own (kill-relay holds it to catch the relay mid-batch), never stalled by a
// failover: on a queue shard's lossy failover the relays stay on the old master's side with the
// producers, so what they add there meanwhile is lost. PostgreSQL they reach straight, logged in
// as the relay role (chaos-services.ts), which may execute the relay's functions and nothing else.
import { join } from 'node:path';
import { redisTargetEnv } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { WorkerProcess } from '../fleet/worker-processes.ts';
import { CHAOS_JOB_ATTEMPTS_MAX, type FleetNames, redisLinkOf } from './chaos-fleet.ts';
import type { ChaosOptions } from './chaos-options.ts';
import type { ChaosServices } from './chaos-services.ts';
import type { LinkProxy } from './fault-proxy.ts';

export const RELAY_ENTRY = join(PROJECT_ROOT, 'src', 'cli', 'relay-cli.ts');
/** Requests a relay claims per batch in a chaos run. */
export const CHAOS_RELAY_BATCH_MAX = 200;
/** Its rest after a round that found nothing: short, as the producer sends every 100 ms. */
export const CHAOS_RELAY_IDLE_MS = 50;

export interface ChaosRelay {
  readonly process: WorkerProcess;
  /** Its Redis link. */
  readonly redis: LinkProxy;
}

export class ChaosRelays {
  private constructor(readonly relays: readonly ChaosRelay[]) {}

  static async create(
    options: ChaosOptions,
    services: ChaosServices,
    names: FleetNames,
    logDir: string,
  ): Promise<ChaosRelays> {
    const relays: ChaosRelay[] = [];
    try {
      for (let index = 1; index <= options.relays; index++) {
        const link = await redisLinkOf(index, services, 'relay');
        const env = { ...ChaosRelays.env(options, services, names), ...link.env };
        relays.push({ process: new WorkerProcess(index, { env, logDir, entry: RELAY_ENTRY }), redis: link.proxy });
      }
    } catch (err) {
      await Promise.all(relays.map((r) => r.redis.close()));
      throw err;
    }
    return new ChaosRelays(relays);
  }

  private static env(options: ChaosOptions, services: ChaosServices, names: FleetNames): Record<string, string> {
    return {
      DATABASE_URL: services.relayDatabaseUrl,
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
      // --relay-pool-max (1 on every third seed): the relay's rounds, its publisher and its gauges on one connection.
      ...(options.relayPoolMax === null ? {} : { DB_POOL_MAX: String(options.relayPoolMax) }),
    };
  }

  relay(index: number): ChaosRelay {
    const r = this.relays[index - 1];
    if (r === undefined) throw new RangeError(`no relay ${index}`);
    return r;
  }

  startAll(): void {
    for (const r of this.relays) r.process.start();
  }

  /** Every relay's link a plain pipe and every relay running again (the end of the fault phase). */
  healAll(): void {
    for (const r of this.relays) {
      r.redis.heal();
      if (!r.process.running) r.process.start();
    }
  }

  pids(): number[] {
    return this.relays.map((r) => r.process.pid).filter((p): p is number => p !== undefined);
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.relays.map((r) => r.process.stop()));
  }

  async closeProxies(): Promise<void> {
    await Promise.all(this.relays.map((r) => r.redis.close()));
  }
}
