// Injects the scheduled faults at their offsets and heals each one when its window ends;
// records every start and end (with what it actually did) in the history. The clock is the
// harness's; a fault that cannot be injected (Redis down for another fault) is logged, not fatal.
import { setTimeout as sleep } from 'node:timers/promises';
import { deleteMatching } from '../queue/redis-scan.ts';
import type { RedisClient } from '../queue/redis-connection.ts';
import type { ChaosFleet } from './fleet.ts';
import type { History } from './history.ts';
import type { FaultKind } from './options.ts';
import { describeFault, type FaultEvent } from './schedule.ts';
import type { ChaosServices } from './services.ts';

/** delete-locks sweeps the lock keys this often during its window. */
export const LOCK_SWEEP_INTERVAL_MS = 10;

/** What a fault actually did, with its measured window (offsets from the start of the fault phase). */
export interface FaultRecord {
  readonly id: number;
  readonly kind: FaultKind;
  readonly startMs: number;
  endMs: number;
  readonly worker: number | null;
  readonly link: string | null;
  detail: string;
  error: string | null;
}

export class FaultInjector {
  readonly records: FaultRecord[] = [];
  private readonly pending = new Map<number, { timer: NodeJS.Timeout; heal: () => Promise<void> }>();

  constructor(
    private readonly fleet: ChaosFleet,
    private readonly services: ChaosServices,
    /** A harness connection straight to Redis (not through a proxy). */
    private readonly redis: RedisClient,
    private readonly lockKeyPrefix: string,
    private readonly history: History,
    private readonly onChange?: () => void,
  ) {}

  get active(): number {
    return this.pending.size;
  }

  /** Runs the schedule until its end or until `signal` fires; faults still open are then healed. */
  async run(schedule: readonly FaultEvent[], signal: AbortSignal): Promise<void> {
    for (const event of schedule) {
      const waitMs = event.atMs - this.history.nowMs();
      if (waitMs > 0) {
        try {
          await sleep(waitMs, undefined, { signal });
        } catch {
          break;
        }
      }
      if (signal.aborted) break;
      await this.inject(event);
    }
  }

  /** Ends every open fault now (the fault phase is over). */
  async healAll(): Promise<void> {
    await Promise.all([...this.pending.values()].map((p) => p.heal()));
    this.fleet.healAll();
  }

  private async inject(event: FaultEvent): Promise<void> {
    const record: FaultRecord = { id: event.id, kind: event.kind, startMs: this.history.nowMs(), endMs: 0,
      worker: event.worker, link: event.link, detail: describeFault(event), error: null };
    this.records.push(record);
    try {
      const heal = await this.start(event, record);
      this.history.write({ type: 'fault_start', faultId: event.id, kind: event.kind, worker: event.worker, link: event.link,
        detail: record.detail }, record.startMs);
      if (heal === null) {
        record.endMs = this.history.nowMs();
        this.history.write({ type: 'fault_end', faultId: event.id, kind: event.kind, detail: record.detail });
      } else {
        let ended = false;
        const finish = async (detail?: string) => {
          if (ended) return;
          ended = true;
          const open = this.pending.get(event.id);
          if (open !== undefined) clearTimeout(open.timer);
          this.pending.delete(event.id);
          try {
            await heal();
          } catch (err) {
            record.error = err instanceof Error ? err.message : String(err);
            this.history.write({ type: 'fault_error', faultId: event.id, kind: event.kind, error: record.error });
          }
          record.endMs = this.history.nowMs();
          this.history.write({ type: 'fault_end', faultId: event.id, kind: event.kind, ...(detail === undefined ? {} : { detail }) });
          this.onChange?.();
        };
        const timer = setTimeout(() => void finish(), event.durationMs);
        this.pending.set(event.id, { timer, heal: () => finish('healed at the end of the fault phase') });
      }
    } catch (err) {
      record.error = err instanceof Error ? err.message : String(err);
      record.endMs = this.history.nowMs();
      this.history.write({ type: 'fault_error', faultId: event.id, kind: event.kind, error: record.error });
    }
    this.onChange?.();
  }

  /** Starts one fault; returns how to heal it, or null when it is over already. */
  private async start(event: FaultEvent, record: FaultRecord): Promise<(() => Promise<void>) | null> {
    const target = () => this.fleet.worker(event.worker ?? 1);
    const lockPattern = `${this.lockKeyPrefix}{wallet:*}:lock`;
    const fencePattern = `${this.lockKeyPrefix}{wallet:*}:fence`;
    switch (event.kind) {
      case 'kill-worker': {
        const proc = target().process;
        await proc.kill();
        return async () => proc.start();
      }
      case 'pause-worker': {
        const proc = target().process;
        proc.freeze();
        return async () => proc.thaw();
      }
      case 'delete-locks': {
        // Locks are held for milliseconds, so one sweep mostly finds none: sweep again and
        // again for the fault's window, so that holders in the middle of a transfer lose theirs.
        let deleted = 0;
        let sweeps = 0;
        let sweeping = true;
        const storm = (async () => {
          while (sweeping) {
            try {
              deleted += await deleteMatching(this.redis, lockPattern);
              sweeps += 1;
            } catch {
              // Redis restarting for another fault: sweep again on the next tick.
            }
            await sleep(LOCK_SWEEP_INTERVAL_MS);
          }
        })();
        return async () => {
          sweeping = false;
          await storm;
          record.detail += `: ${deleted} held lock keys deleted in ${sweeps} sweeps`;
        };
      }
      case 'delete-fences': {
        const n = await deleteMatching(this.redis, fencePattern);
        record.detail += `: ${n} fence counters deleted`;
        return null;
      }
      case 'restart-redis': {
        // The lock service loses its data (DESIGN: "Redis restarted without persistence"); the
        // queue, kept in the same AOF-backed server, survives the restart.
        const locks = await deleteMatching(this.redis, lockPattern);
        const fences = await deleteMatching(this.redis, fencePattern);
        const t = performance.now();
        await this.services.restartRedis();
        record.detail += `: ${locks} lock keys and ${fences} fence counters deleted, then SIGKILL and restart from AOF in ${Math.round(performance.now() - t)} ms`;
        return null;
      }
      case 'terminate-backends': {
        const n = await this.services.terminateWorkerBackends();
        record.detail += `: ${n} worker sessions terminated`;
        return null;
      }
      case 'link-delay': {
        const proxy = target().proxies[event.link ?? 'redis'];
        proxy.setDelay(event.delayMs ?? 0, event.jitterMs ?? 0);
        return async () => proxy.setDelay(0, 0);
      }
      case 'link-stall': {
        const proxy = target().proxies[event.link ?? 'redis'];
        proxy.stall();
        return async () => proxy.unstall();
      }
      case 'link-cut': {
        const proxy = target().proxies[event.link ?? 'redis'];
        proxy.cut();
        return async () => proxy.uncut();
      }
    }
  }
}
