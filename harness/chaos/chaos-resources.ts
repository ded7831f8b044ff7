// Everything a chaos run starts or opens, held in one place so that one close() stops and
// removes all of it, in order, also when the run fails or is interrupted.
import type { QueueEvents } from 'bullmq';
import type pg from 'pg';
import type { PrismaClient } from '../../src/db/prisma.ts';
import type { TransferQueues } from '../../src/queue/producer.ts';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import { deleteMatching } from '../../src/queue/redis-scan.ts';
import type { ChaosFleet, FleetNames } from './chaos-fleet.ts';
import type { HoldWatch } from './chaos-lock.ts';
import type { ChaosRelays } from './chaos-relays.ts';
import type { ChaosServices, ProcessRegistry } from './chaos-services.ts';
import type { FeedReaders } from './feed-readers.ts';
import type { History } from './history.ts';

export class ChaosResources {
  services: ChaosServices | null = null;
  fleet: ChaosFleet | null = null;
  /** An intake run's relay processes, and its producer's database pool. */
  relays: ChaosRelays | null = null;
  producerPool: pg.Pool | null = null;
  /** An intake run's readers of the outcome feed (and their read role). */
  feedReaders: FeedReaders | null = null;
  queues: TransferQueues | null = null;
  readonly queueEvents: QueueEvents[] = [];
  /** Connections the harness opened itself; disconnected at the end. */
  readonly connections: RedisClient[] = [];
  /** The harness's own database sessions, open only while it seeds or checks. */
  prisma: PrismaClient | null = null;
  /** The progress line's timer, from the fault phase until the drain ends. */
  ticker: NodeJS.Timeout | null = null;
  /** The watch on how long wallets stay held (chaos-lock.ts), from the fault phase to the drain's end. */
  holdWatch: HoldWatch | null = null;

  constructor(
    private readonly registry: ProcessRegistry,
    private readonly history: History,
    private readonly names: FleetNames,
    private readonly log: (line: string) => void,
  ) {}

  stopTicker(): void {
    if (this.ticker !== null) clearInterval(this.ticker);
    this.ticker = null;
  }

  /** Stops and removes what the run started; never throws (each failure is logged or ignored). */
  async close(): Promise<void> {
    const { services, fleet, queues } = this;
    this.stopTicker();
    await this.holdWatch?.stop().catch(() => undefined);
    await this.prisma?.$disconnect().catch(() => undefined);
    await fleet?.stopAll().catch(() => undefined);
    await this.relays?.stopAll().catch(() => undefined);
    await this.relays?.closeProxies().catch(() => undefined);
    await this.producerPool?.end().catch(() => undefined);
    await this.feedReaders?.stop().catch(() => undefined);
    await fleet?.closeProxies().catch(() => undefined);
    this.registry.update({ workerPids: [] });
    if (services !== null && !services.ownsRedis && queues !== null) await this.removeOwnKeys(services, queues);
    for (const events of this.queueEvents) await events.close().catch(() => undefined);
    await queues?.close().catch(() => undefined);
    for (const c of this.connections) c.disconnect();
    await services?.stop().catch(() => undefined);
    await this.history.close();
  }

  /** A server we do not own keeps nothing of ours: the queues and every key under our prefix go. */
  private async removeOwnKeys(services: ChaosServices, queues: TransferQueues): Promise<void> {
    const { log, names } = this;
    for (const q of queues.queues)
      await q
        .obliterate({ force: true })
        .catch((err: unknown) => log(`could not remove queue ${q.name}: ${String(err)}`));
    const cleaner = services.redisClient();
    await deleteMatching(cleaner, `${names.lockKeyPrefix}*`).catch((err: unknown) =>
      log(`could not remove keys ${names.lockKeyPrefix}*: ${String(err)}`),
    );
    cleaner.disconnect();
  }
}
