// Where and with what the figures were taken: the machine (cores, memory, CPU model, load),
// the versions of Node, the servers and the queue libraries, and the project's commit.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { withDatabase } from '../../src/config/config.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { median } from './measure.ts';

export interface MachineInfo {
  readonly cores: number;
  readonly cpuModel: string;
  readonly memoryGiB: number;
  readonly kernel: string;
  /** 1-minute load average when the bench started and ended: other work on the machine shows here. */
  readonly loadAverage1mStart: number;
  loadAverage1mEnd: number | null;
  /**
   * Median microseconds of one PING to the queue's Redis, one at a time from the bench process,
   * when the bench started and ended (redisRoundTripUs). The load average misses a host that
   * wakes this machine's processes slowly; queue work, made of small round trips, slows with it.
   */
  redisRoundTripUsStart: number | null;
  redisRoundTripUsEnd: number | null;
}

export interface Versions {
  readonly node: string;
  readonly postgres: string;
  readonly redis: string;
  readonly bullmq: string | null;
  readonly graphileWorker: string | null;
  readonly prisma: string | null;
  readonly projectCommit: string | null;
  /** Tracked files differ from the commit. */
  readonly projectDirty: boolean | null;
}

export function machineInfo(): MachineInfo {
  const all = cpus();
  return {
    cores: all.length,
    cpuModel: all[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    kernel: release(),
    loadAverage1mStart: Math.round((loadavg()[0] ?? 0) * 100) / 100,
    loadAverage1mEnd: null,
    redisRoundTripUsStart: null,
    redisRoundTripUsEnd: null,
  };
}

/** PINGs per round-trip probe: about a tenth of a second on a quiet machine. */
export const ROUND_TRIP_PINGS = 2_000;

/**
 * The median of `pings` PING round trips to `redis`, each sent after the previous answer, in
 * microseconds (one decimal): the time a small request takes through the loopback and two
 * wake-ups, which bounds how fast a queue of small commands can go on this machine.
 */
export async function redisRoundTripUs(redis: Redis, pings: number = ROUND_TRIP_PINGS): Promise<number> {
  if (!Number.isInteger(pings) || pings < 1) throw new RangeError(`pings must be a positive integer, got ${pings}`);
  const samples: number[] = [];
  for (let i = 0; i < pings; i++) {
    const t0 = process.hrtime.bigint();
    await redis.ping();
    samples.push(Number(process.hrtime.bigint() - t0) / 1_000);
  }
  return Math.round((median(samples) as number) * 10) / 10;
}

export function currentLoadAverage1m(): number {
  return Math.round((loadavg()[0] ?? 0) * 100) / 100;
}

function packageVersion(name: string): string | null {
  try {
    const manifest = JSON.parse(readFileSync(join(PROJECT_ROOT, 'node_modules', name, 'package.json'), 'utf8')) as {
      version?: unknown;
    };
    return typeof manifest.version === 'string' ? manifest.version : null;
  } catch {
    return null;
  }
}

function git(args: string[]): string | null {
  try {
    return execFileSync('git', args, {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return null;
  }
}

export async function versions(databaseUrl: string, redis: Redis): Promise<Versions> {
  const client = new pg.Client({ connectionString: withDatabase(databaseUrl, 'postgres') });
  await client.connect();
  let postgres: string;
  try {
    postgres =
      (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? 'unknown';
  } finally {
    await client.end();
  }
  const info = await redis.info('server');
  const redisVersion = /^redis_version:(\S+)$/m.exec(info)?.[1] ?? 'unknown';
  const status = git(['status', '--porcelain', '--untracked-files=no']);
  return {
    node: process.version,
    postgres,
    redis: redisVersion,
    bullmq: packageVersion('bullmq'),
    graphileWorker: packageVersion('graphile-worker'),
    prisma: packageVersion('@prisma/client'),
    projectCommit: git(['rev-parse', 'HEAD']),
    projectDirty: status === null ? null : status !== '',
  };
}
