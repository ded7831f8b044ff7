// After a run: what each fault met and what followed it. The load of a fault is the number of
// transfers in flight during its window (submitted before it ended — the producer's first try,
// so a transfer it could not enqueue because of the fault counts —, answered after it began,
// or never) and the number answered inside it: a fault that met none tested nothing. A fault
// shorter than a second (a deletion, a termination) is measured over the second after its
// start: what it does lasts until the next transfers arrive. The recovery
// of a lossy failover is read from the workers' logs and from Redis: the refusals of the stale
// tokens the new master handed out on the wallets whose counters went back, the fences raised
// past the database's, and whether each of those counters is back above its lost value.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { lockKeysOf } from '../../src/lock/lock-keys.ts';
import type { RedisClient } from '../../src/queue/redis-connection.ts';
import type { ChaosMessage } from './chaos-workload.ts';
import type { FaultRecord } from './faults.ts';
import type { FinalJob } from './final-job.ts';
import type { History } from './history.ts';

/** Faults shorter than this are measured over this long from their start. */
export const FAULT_AFTERMATH_MS = 1_000;
/** Refusals and fence advances on a lost wallet count for its failover within this long after the takeover. */
export const RECOVERY_WINDOW_MS = 15_000;
/** Faults after which a stale fence may have another cause: they close a failover's recovery window. */
const FENCE_FAULTS = new Set(['delete-fences', 'restart-redis', 'failover-lossy', 'kill-master']);

export interface FailoverRecovery {
  /** Decisions refused with a stale token on the wallets whose counter went back, after the takeover. */
  readonly staleFenceRefusals: number;
  /** Counters raised past the database's fence on those wallets (advance-fence answered `raised`). */
  readonly fencesAdvanced: number;
  readonly walletsBehind: number;
  /** Of those, how many counters are at or above the value the old master had, at the end of the run. */
  readonly walletsRecovered: number;
}

/** Sets `load` on every fault record from the valid transfers' enqueue and answer times. */
export function attachFaultLoads(
  records: FaultRecord[],
  jobs: readonly FinalJob[],
  sent: ReadonlyMap<string, ChaosMessage>,
  history: Pick<History, 'offsetOfWallMs'>,
  firstTryMs: ReadonlyMap<string, number> = new Map(),
): void {
  const spans = jobs
    .filter((j) => sent.get(j.jobId)?.kind !== 'invalid' && sent.has(j.jobId))
    .map((j) => ({
      from: Math.min(firstTryMs.get(j.jobId) ?? Infinity, history.offsetOfWallMs(j.timestamp)),
      to: j.finishedOn === null ? Infinity : history.offsetOfWallMs(j.finishedOn),
    }));
  for (const r of records) {
    const end = Math.max(r.endMs, r.startMs + FAULT_AFTERMATH_MS);
    r.load = {
      inFlight: spans.filter((s) => s.from <= end && s.to >= r.startMs).length,
      answeredDuring: spans.filter((s) => s.to >= r.startMs && s.to <= end).length,
    };
  }
}

interface LogLine {
  time?: number;
  event?: string;
  walletId?: string;
  outcome?: string;
}

function* workerLogLines(logDir: string): Generator<LogLine> {
  if (!existsSync(logDir)) return;
  for (const file of readdirSync(logDir).filter((f) => f.endsWith('.log'))) {
    for (const line of readFileSync(join(logDir, file), 'utf8').split('\n')) {
      if (!line.startsWith('{') || !(line.includes('transfer_stale_fence') || line.includes('lock_fence_advanced')))
        continue;
      try {
        yield JSON.parse(line) as LogLine;
      } catch {
        // A line cut by a SIGKILL.
      }
    }
  }
}

/** Sets `recovery` on every lossy failover that lost fence increments. */
export async function attachRecovery(
  records: FaultRecord[],
  logDir: string,
  t0WallMs: number,
  redis: RedisClient,
  lockKeyPrefix: string,
): Promise<void> {
  const lossy = records.filter((r) => r.failover?.kind === 'lossy' && r.failoverAtMs !== undefined);
  if (lossy.length === 0) return;
  const lines = [...workerLogLines(logDir)];
  for (const r of lossy) {
    if (r.failover?.kind !== 'lossy') continue;
    const from = t0WallMs + (r.failoverAtMs as number);
    const nextFenceFault = records.find(
      (o) => o !== r && FENCE_FAULTS.has(o.kind) && o.startMs > (r.failoverAtMs as number),
    );
    const to = Math.min(
      from + RECOVERY_WINDOW_MS,
      nextFenceFault === undefined ? Infinity : t0WallMs + nextFenceFault.startMs,
    );
    const behind = r.failover.walletsBehind;
    const inWindow = lines.filter(
      (l) =>
        typeof l.time === 'number' &&
        l.time >= from &&
        l.time < to &&
        typeof l.walletId === 'string' &&
        l.walletId in behind,
    );
    let walletsRecovered = 0;
    for (const [wallet, lost] of Object.entries(behind)) {
      const now = await redis.get(lockKeysOf(lockKeyPrefix, wallet).fenceKey).catch(() => null);
      if (now !== null && /^\d+$/.test(now) && BigInt(now) >= BigInt(lost)) walletsRecovered += 1;
    }
    r.recovery = {
      staleFenceRefusals: inWindow.filter((l) => l.event === 'transfer_stale_fence').length,
      fencesAdvanced: inWindow.filter((l) => l.event === 'lock_fence_advanced' && l.outcome === 'raised').length,
      walletsBehind: Object.keys(behind).length,
      walletsRecovered,
    };
  }
}
