// The bench's CPU account (harness/bench/cpu-account.ts): the /proc and INFO parsers, the window
// arithmetic on made-up samples, and a sampler against the real machine, PostgreSQL and Redis,
// where a child process that burns a known amount of CPU must show up in the `processes` part
// and one that sleeps must not.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CpuSample,
  cpuAccount,
  parseMachineStat,
  parseProcStat,
  parseRedisCpuMs,
  parseSchedstatRunNs,
  phaseAccount,
  startCpuSampler,
} from '../../../harness/bench/cpu-account.ts';
import { loadConfig, withDatabase } from '../../../src/config/config.ts';

describe('parsers', () => {
  it('reads utime, stime, cutime, cstime and ppid past a command name with spaces and parentheses', () => {
    // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime ...
    const stat = '4242 (node (x) y) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 40 7 3 20 0 11 0 5 0 0';
    expect(parseProcStat(stat)).toEqual({ selfTicks: 290, childrenTicks: 10, ppid: 17 });
    expect(parseProcStat('no parenthesis here')).toBeNull();
    expect(parseProcStat('1 (x) S 1 2')).toBeNull();
  });

  it('counts user, nice, system, irq, softirq and steal as busy, idle and iowait as not', () => {
    const stat = 'cpu  100 5 50 1000 20 3 2 10 0 0\ncpu0 50 2 25 500 10 1 1 5 0 0\nintr 1';
    expect(parseMachineStat(stat)).toEqual({ busyTicks: 170, totalTicks: 1190 });
    expect(parseMachineStat('intr 1')).toBeNull();
  });

  it('reads used_cpu_user + used_cpu_sys from INFO cpu as milliseconds', () => {
    const info = '# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n';
    expect(parseRedisCpuMs(info)).toBeCloseTo(3_750, 6);
    expect(parseRedisCpuMs('# CPU\r\n')).toBeNull();
  });
});

describe('cpuAccount', () => {
  const sample = (
    atMs: number,
    processes: number | null,
    postgres: number | null,
    machine: number | null,
  ): CpuSample => ({
    atMs,
    cpuMs: { processes, relays: null, postgres, redis: 10, etcd: null, bench: 0, machine },
  });

  it('takes the first and last samples inside the span and divides by the transfers committed between them', () => {
    const samples = [
      sample(0, 0, 0, 0), // before the first commit: start-up, left out
      sample(1_000, 100, 200, 400),
      sample(2_000, 300, 600, 1_100),
      sample(3_000, 500, 1_000, 1_800),
      sample(9_000, 9_000, 9_000, 9_000), // after the last commit: drain, left out
    ];
    // 1 commit at 500, 4 in (1000, 3000], 1 at 3500.
    const commits = [500, 1_200, 1_900, 2_500, 3_000, 3_500];
    const account = cpuAccount(samples, commits);
    expect(account).toEqual({
      windowMs: 2_000,
      transfers: 4,
      msPerTransfer: {
        processes: 100,
        relays: null,
        postgres: 200,
        redis: 0,
        etcd: null,
        bench: 0,
        machine: 350,
        other: 50,
      },
      machineCores: 0.7,
    });
  });

  it('gives no figure for a part that could not be read, or whose counter went back (a restarted server)', () => {
    const account = cpuAccount([sample(1_000, null, 500, null), sample(2_000, 100, 100, null)], [999, 1_500, 2_001]);
    expect(account?.msPerTransfer).toMatchObject({ processes: null, postgres: null, machine: null, other: null });
    expect(account?.machineCores).toBeNull();
  });

  it('gives no account when fewer than two samples fall inside the span, or nothing completed between them', () => {
    expect(cpuAccount([sample(0, 0, 0, 0), sample(5_000, 1, 1, 1)], [1_000, 2_000])).toBeNull();
    expect(cpuAccount([sample(1_000, 0, 0, 0), sample(2_000, 1, 1, 1)], [900, 2_100])).toBeNull();
    expect(cpuAccount([sample(1_000, 0, 0, 0)], [1_000])).toBeNull();
  });

  it('counts the etcd members as a part of their own, not as "other"', () => {
    const at = (atMs: number, etcd: number): CpuSample => ({
      atMs,
      cpuMs: { processes: 0, relays: null, postgres: 0, redis: 0, etcd, bench: 0, machine: 2 * etcd },
    });
    const account = cpuAccount([at(1_000, 100), at(2_000, 300)], [999, 1_500, 2_000, 2_001]);
    expect(account?.msPerTransfer).toMatchObject({ etcd: 100, machine: 200, other: 100 });
  });

  it('accounts a whole phase from its first sample to its last, over the count given (the intake producer)', () => {
    const samples = [sample(1_000, null, 100, 200), sample(1_500, null, 160, 300), sample(3_000, null, 300, 800)];
    expect(phaseAccount(samples, 100)).toEqual({
      windowMs: 2_000,
      transfers: 100,
      msPerTransfer: {
        processes: null,
        relays: null,
        postgres: 2,
        redis: 0,
        etcd: null,
        bench: 0,
        machine: 6,
        other: 4,
      },
      machineCores: 0.3,
    });
    expect(phaseAccount(samples.slice(0, 1), 100)).toBeNull();
    expect(phaseAccount(samples, 0)).toBeNull();
  });
});

/** The burst test: processes, and 1 ms bursts of CPU each. */
const BURSTING_PROCESSES = 16;
const BURSTS = 8;

describe('CpuSampler on this machine', () => {
  const config = loadConfig();
  let pool: pg.Pool;
  let redis: Redis;

  beforeAll(() => {
    // The server's maintenance database: the sampler needs a connection, not a schema.
    pool = new pg.Pool({ connectionString: withDatabase(config.databaseUrl, 'postgres'), max: 1 });
    redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await pool.end();
    redis.disconnect();
  });

  /**
   * A node child that, once told to go, burns `cpuMs` of its own CPU (or sleeps as long), says
   * done and waits to be killed. It says ready first, so its start-up is not measured.
   */
  async function child(kind: 'burn' | 'sleep', cpuMs: number): Promise<ChildProcess> {
    const work =
      kind === 'burn'
        ? `const t=process.cpuUsage();while((process.cpuUsage(t).user+process.cpuUsage(t).system)/1000<${cpuMs});done()`
        : `setTimeout(done,${cpuMs})`;
    const code = `const done=()=>process.stdout.write('done\\n');process.stdin.once('data',()=>{${work}});process.stdout.write('ready\\n')`;
    const p = spawn(process.execPath, ['-e', code], { stdio: ['pipe', 'pipe', 'inherit'] });
    await once(p.stdout as NodeJS.ReadableStream, 'data');
    return p;
  }

  async function measure(
    kind: 'burn' | 'sleep',
  ): Promise<{ processes: number; postgres: number; redis: number; machine: number }> {
    const p = await child(kind, 400);
    try {
      const sampler = await startCpuSampler({
        processPids: () => (p.pid === undefined ? [] : [p.pid]),
        pool,
        redis,
        intervalMs: 50,
      });
      p.stdin?.write('go\n');
      await once(p.stdout as NodeJS.ReadableStream, 'data');
      // Work on both servers while sampling: a CPU-bound query and a few thousand commands.
      await pool.query('SELECT count(*) FROM generate_series(1, 2000000)');
      const pipeline = redis.pipeline();
      for (let i = 0; i < 5_000; i++) pipeline.ping();
      await pipeline.exec();
      const samples = await sampler.stop();
      const first = samples[0];
      const last = samples.at(-1);
      if (first === undefined || last === undefined) throw new Error('no samples');
      const delta = (k: 'processes' | 'postgres' | 'redis' | 'machine') => {
        const a = first.cpuMs[k];
        const b = last.cpuMs[k];
        if (a === null || b === null) throw new Error(`${k} was not read`);
        return b - a;
      };
      return {
        processes: delta('processes'),
        postgres: delta('postgres'),
        redis: delta('redis'),
        machine: delta('machine'),
      };
    } finally {
      p.kill('SIGKILL');
    }
  }

  it('charges processes that run in bursts shorter than a clock tick, as PostgreSQL backends do', async () => {
    // 16 processes, each busy in 1 ms bursts with pauses between (a backend answering short
    // statements), each reporting its own CPU (getrusage: exact). Read from the clock ticks of
    // /proc/<pid>/stat, such processes are charged late and unevenly: 16 PostgreSQL backends
    // gained no tick in 300 ms of short transactions (see cpu-account.ts).
    const code =
      `process.stdin.once('data',()=>{const t0=process.cpuUsage();let left=${BURSTS};` +
      'const step=()=>{const s=process.hrtime.bigint();while(process.hrtime.bigint()-s<1000000n){}' +
      "if(--left>0)setTimeout(step,4);else{const u=process.cpuUsage(t0);process.stdout.write(String((u.user+u.system)/1000)+'\\n')}};step()});" +
      "process.stdout.write('ready\\n')";
    const children = await Promise.all(
      Array.from({ length: BURSTING_PROCESSES }, async () => {
        const p = spawn(process.execPath, ['-e', code], { stdio: ['pipe', 'pipe', 'inherit'] });
        await once(p.stdout as NodeJS.ReadableStream, 'data');
        return p;
      }),
    );
    try {
      const sampler = await startCpuSampler({
        processPids: () => children.flatMap((p) => (p.pid === undefined ? [] : [p.pid])),
        pool: null,
        redis: null,
        intervalMs: 50,
      });
      const reported = children.map(async (p) =>
        Number(String((await once(p.stdout as NodeJS.ReadableStream, 'data'))[0])),
      );
      for (const p of children) p.stdin?.write('go\n');
      const burntMs = (await Promise.all(reported)).reduce((a, b) => a + b, 0);
      const samples = await sampler.stop();
      const [first, last] = [samples[0]?.cpuMs.processes, samples.at(-1)?.cpuMs.processes];
      if (first == null || last == null) throw new Error('processes were not read');
      expect(burntMs).toBeGreaterThan(BURSTING_PROCESSES * BURSTS * 0.9);
      // The account may add a little (the processes' other threads), never miss a fifth.
      expect(last - first).toBeGreaterThanOrEqual(burntMs * 0.8);
      expect(last - first).toBeLessThan(burntMs * 1.5 + 50);
    } finally {
      for (const p of children) p.kill('SIGKILL');
    }
  }, 30_000);

  it('reads the etcd members like the processes, and gives no etcd part without them', async () => {
    // This process stands in for a member: it burns 100 ms of its own CPU between two samples.
    const sampler = await startCpuSampler({ pool: null, redis: null, intervalMs: 50, etcdPids: () => [process.pid] });
    const t = process.cpuUsage();
    while ((process.cpuUsage(t).user + process.cpuUsage(t).system) / 1000 < 100);
    const samples = await sampler.stop();
    const [first, last] = [samples[0]?.cpuMs.etcd, samples.at(-1)?.cpuMs.etcd];
    if (first == null || last == null) throw new Error('etcd was not read');
    expect(last - first).toBeGreaterThanOrEqual(80);
    const none = await startCpuSampler({ pool: null, redis: null, intervalMs: 50 });
    expect((await none.stop()).every((s) => s.cpuMs.etcd === null)).toBe(true);
  });

  it("counts the CPU a case process burns, the servers' work and the machine's; a sleeping process counts next to nothing", async () => {
    const burning = await measure('burn');
    // 400 ms burnt, read in 10 ms ticks; the sampler may start a little after the child.
    expect(burning.processes).toBeGreaterThanOrEqual(250);
    expect(burning.processes).toBeLessThanOrEqual(600);
    expect(burning.postgres).toBeGreaterThan(20);
    expect(burning.redis).toBeGreaterThan(0);
    expect(burning.machine).toBeGreaterThanOrEqual(burning.processes);

    const sleeping = await measure('sleep');
    expect(sleeping.processes).toBeLessThan(60);
  }, 30_000);
});

describe('parseSchedstatRunNs', () => {
  it('reads the run time, the first field, in nanoseconds', () => {
    expect(parseSchedstatRunNs('1234567890 2000 17\n')).toBe(1_234_567_890);
  });

  it('refuses what is not a count of nanoseconds', () => {
    for (const text of ['', 'x 1 2', '-5 1 2', '1.5 1 2']) expect(parseSchedstatRunNs(text), text).toBeNull();
  });
});
