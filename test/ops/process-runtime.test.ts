// The runtime every long-running process uses (src/ops/process-runtime.ts), with no server: its
// probes are functions the test sets, its `process` an EventEmitter that records exit() (fast and
// exact), and, for the real signals and crash handlers, a child process that runs it
// (test/support/runtime-child.ts). Checked: the first SIGTERM stops gracefully (exit 0); a repeat
// within the window is the same request; a second signal after it forces exit 1; a crash logs and
// exits 1; the closing steps run one after the other in the declared order (control: run them at
// once, as Promise.all does, and the order test fails); SHUTDOWN_TIMEOUT_MS passing exits 1; the
// start-up wait ends in a StartupError naming the variables and what the probes found.
import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { bundledEntry } from '../../harness/fleet/source-bundle.ts';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { StartupError } from '../../src/errors.ts';
import { HealthMonitor } from '../../src/ops/health-monitor.ts';
import type { ProbeResult } from '../../src/ops/probes.ts';
import {
  type ClosingStep,
  type ProcessLife,
  ProcessRuntime,
  type ProcessRuntimeOptions,
} from '../../src/ops/process-runtime.ts';

/** A `process` whose exit() only records the code. */
class FakeProcess extends EventEmitter {
  readonly exits: number[] = [];
  exit(code: number): void {
    this.exits.push(code);
  }
}

type LogLine = Record<string, unknown> & { event?: string; msg: string; level: number };

interface Harness {
  readonly host: FakeProcess;
  readonly runtime: ProcessRuntime;
  readonly logs: LogLine[];
  /** What the life and its steps did, in order. */
  readonly trace: string[];
  readonly life: ProcessLife;
}

const HEALTHY: ProbeResult = { ok: true };
const REDIS_DOWN: ProbeResult = {
  ok: false,
  variable: 'REDIS_URL',
  detail: 'Redis at redis://h:1: connect ECONNREFUSED',
};

/** A step that records its start and end, and takes `ms`. */
function step(trace: string[], name: string, ms: number): ClosingStep {
  return {
    name,
    close: async () => {
      trace.push(`${name}:start`);
      await sleep(ms);
      trace.push(`${name}:end`);
    },
  };
}

function harness(
  options: {
    probe?: () => ProbeResult;
    closing?: (trace: string[]) => ClosingStep[];
    life?: Partial<ProcessLife>;
    runtime?: Partial<ProcessRuntimeOptions>;
  } = {},
): Harness {
  const host = new FakeProcess();
  const logs: LogLine[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line) as LogLine) });
  const trace: string[] = [];
  const monitor = new HealthMonitor({
    probes: [async () => (options.probe ?? (() => HEALTHY))()],
    logger,
    intervalMs: 10,
  });
  const stopMonitor = monitor.stop.bind(monitor);
  monitor.stop = async () => {
    trace.push('monitor:stop');
    await stopMonitor();
  };
  const runtime = new ProcessRuntime({
    logger,
    monitor,
    startupTimeoutMs: 5_000,
    shutdownTimeoutMs: 5_000,
    host,
    inHand: () => ({ jobsInHand: 3 }),
    ...options.runtime,
  });
  const life: ProcessLife = {
    listen: async () => void trace.push('listen'),
    open: async () => void trace.push('open'),
    begin: () => void trace.push('begin'),
    readiness: () => ({ ready: false, reason: 'the life says no' }),
    stopping: () => 'graceful',
    closing: options.closing?.(trace) ?? [step(trace, 'only', 0)],
    stopped: () => void trace.push('stopped'),
    ...options.life,
  };
  return { host, runtime, logs, trace, life };
}

async function untilRunning(runtime: ProcessRuntime): Promise<void> {
  for (let i = 0; i < 500 && runtime.phase !== 'running'; i++) await sleep(2);
  expect(runtime.phase).toBe('running');
}

describe('signals', () => {
  it('the first SIGTERM stops gracefully: the steps close, stopped() is told, exit code 0', async () => {
    const h = harness();
    const done = h.runtime.run(h.life);
    await untilRunning(h.runtime);
    h.host.emit('SIGTERM', 'SIGTERM');
    expect(await done).toBe(0);
    expect(h.trace).toEqual(['listen', 'open', 'begin', 'monitor:stop', 'only:start', 'only:end', 'stopped']);
    expect(h.host.exits).toEqual([]);
  });

  it('a repeat within the window is the same request: no forced exit', async () => {
    const h = harness({ closing: (trace) => [step(trace, 'slow', 200)] });
    const done = h.runtime.run(h.life);
    await untilRunning(h.runtime);
    h.host.emit('SIGINT', 'SIGINT');
    await sleep(20);
    h.host.emit('SIGINT', 'SIGINT');
    expect(await done).toBe(0);
    expect(h.host.exits).toEqual([]);
    expect(h.logs.some((l) => l.event === 'shutdown_forced')).toBe(false);
  });

  it('a second signal after the window forces exit 1 and says so, with what is in hand', async () => {
    const h = harness({ closing: (trace) => [step(trace, 'slow', 400)], runtime: { signalRepeatWindowMs: 50 } });
    const done = h.runtime.run(h.life);
    await untilRunning(h.runtime);
    h.host.emit('SIGTERM', 'SIGTERM');
    await sleep(100);
    expect(h.host.exits).toEqual([]);
    h.host.emit('SIGINT', 'SIGINT');
    expect(h.host.exits).toEqual([1]);
    expect(h.logs.find((l) => l.event === 'shutdown_forced')).toMatchObject({
      level: 50,
      signal: 'SIGINT',
      jobsInHand: 3,
    });
    await done;
  });
});

describe('crash handlers', () => {
  it('an uncaught exception or an unhandled rejection is logged (fatal) and exits 1', () => {
    const h = harness();
    h.host.emit('uncaughtException', new Error('boom: thrown'));
    h.host.emit('unhandledRejection', new Error('boom: rejected'));
    expect(h.host.exits).toEqual([1, 1]);
    const fatal = h.logs.filter((l) => l.level === 60);
    expect(fatal.map((l) => l.event)).toEqual(['uncaught_exception', 'unhandled_rejection']);
    expect(fatal.map((l) => (l.err as { message: string }).message)).toEqual(['boom: thrown', 'boom: rejected']);
  });
});

describe('the ordered stop', () => {
  it('stops the monitor, then runs each step after the one before has finished, in the declared order', async () => {
    // The first step is the slowest: run at once, the later ones would start (and end) before it ends.
    const h = harness({
      closing: (trace) => [step(trace, 'jobs', 120), step(trace, 'leases', 60), step(trace, 'connections', 0)],
    });
    const done = h.runtime.run(h.life);
    await untilRunning(h.runtime);
    h.host.emit('SIGTERM', 'SIGTERM');
    expect(await done).toBe(0);
    expect(h.trace.slice(h.trace.indexOf('monitor:stop'))).toEqual([
      'monitor:stop',
      'jobs:start',
      'jobs:end',
      'leases:start',
      'leases:end',
      'connections:start',
      'connections:end',
      'stopped',
    ]);
  });

  it('a step that fails is logged, the later steps still run, and the exit code is 1', async () => {
    const h = harness({
      closing: (trace) => [
        {
          name: 'broken',
          close: async () => {
            throw new Error('cannot close');
          },
        },
        step(trace, 'after', 0),
      ],
    });
    const done = h.runtime.run(h.life);
    await untilRunning(h.runtime);
    h.host.emit('SIGTERM', 'SIGTERM');
    expect(await done).toBe(1);
    expect(h.trace).toContain('after:end');
    expect(h.trace).not.toContain('stopped');
    expect(h.logs.find((l) => l.event === 'closing_step_failed')).toMatchObject({ step: 'broken' });
  });

  it('SHUTDOWN_TIMEOUT_MS passing exits 1 and says so', async () => {
    let release = (): void => undefined;
    const h = harness({
      closing: () => [{ name: 'stuck', close: () => new Promise<void>((resolve) => (release = resolve)) }],
      runtime: { shutdownTimeoutMs: 100 },
    });
    const done = h.runtime.run(h.life);
    await untilRunning(h.runtime);
    h.host.emit('SIGTERM', 'SIGTERM');
    await sleep(50);
    expect(h.host.exits).toEqual([]);
    await sleep(150);
    expect(h.host.exits).toEqual([1]);
    expect(h.logs.find((l) => l.event === 'shutdown_timed_out')).toMatchObject({
      shutdownTimeoutMs: 100,
      jobsInHand: 3,
    });
    release();
    await done;
  });

  it("the unsafe 'abandon' answer exits 0 at once, closing nothing", async () => {
    const h = harness({ life: { stopping: () => 'abandon' } });
    const done = h.runtime.run(h.life);
    await untilRunning(h.runtime);
    h.host.emit('SIGTERM', 'SIGTERM');
    expect(await done).toBe(0);
    expect(h.trace).toEqual(['listen', 'open', 'begin']);
  });
});

describe('the start', () => {
  it('past STARTUP_TIMEOUT_MS: a StartupError naming the variable and what the probes found, after closing what is open', async () => {
    const h = harness({ probe: () => REDIS_DOWN, runtime: { startupTimeoutMs: 100 } });
    const error = await h.runtime.run(h.life).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(StartupError);
    expect((error as StartupError).message).toBe(
      'REDIS_URL: Redis at redis://h:1: connect ECONNREFUSED; still not ready after STARTUP_TIMEOUT_MS=100 ms',
    );
    expect(h.trace).toEqual(['listen', 'monitor:stop', 'only:start', 'only:end']);
  });

  it('/readyz says what does not answer while starting, asks the process while running, and refuses while stopping', async () => {
    let probe: ProbeResult = REDIS_DOWN;
    const h = harness({ probe: () => probe, closing: (trace) => [step(trace, 'slow', 100)] });
    const done = h.runtime.run(h.life);
    await sleep(30);
    expect(h.runtime.readiness()).toEqual({
      ready: false,
      reason: 'starting: Redis at redis://h:1: connect ECONNREFUSED',
    });
    probe = HEALTHY;
    await untilRunning(h.runtime);
    expect(h.runtime.readiness()).toEqual({ ready: false, reason: 'the life says no' });
    h.host.emit('SIGTERM', 'SIGTERM');
    await sleep(20);
    expect(h.runtime.readiness()).toEqual({ ready: false, reason: 'shutting down' });
    expect(await done).toBe(0);
  });

  it('a signal during the wait: nothing opened, what is open closed, exit 0', async () => {
    const h = harness({ probe: () => REDIS_DOWN });
    const done = h.runtime.run(h.life);
    await sleep(30);
    h.host.emit('SIGTERM', 'SIGTERM');
    expect(await done).toBe(0);
    expect(h.trace).toEqual(['listen', 'monitor:stop', 'only:start', 'only:end']);
    expect(h.logs.some((l) => l.msg === 'stopped before it was ready')).toBe(true);
  });

  it('open() failing closes what is open, then the error goes on', async () => {
    const h = harness({
      life: {
        open: async () => {
          throw new Error('cannot open');
        },
      },
    });
    await expect(h.runtime.run(h.life)).rejects.toThrow('cannot open');
    expect(h.trace).toEqual(['listen', 'monitor:stop', 'only:start', 'only:end']);
  });
});

const CHILD = join(PROJECT_ROOT, 'test', 'support', 'runtime-child.ts');

/** Runs the child; `onRunning` acts on it once it prints `running`. */
function runChild(
  mode: string,
  env: Record<string, string>,
  onRunning: (pid: number) => Promise<void> | void,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; log: LogLine[] }> {
  const child = spawn(process.execPath, [bundledEntry(CHILD), mode], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    if (chunk.includes('running')) void onRunning(child.pid as number);
  });
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      const log = stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as LogLine);
      resolve({ code, signal, log });
    });
  });
}

describe('as a real process', () => {
  it('SIGTERM: exit 0 after the closing step', async () => {
    const r = await runChild('run', { CLOSE_MS: '100' }, (pid) => void process.kill(pid, 'SIGTERM'));
    expect(r).toMatchObject({ code: 0, signal: null });
    expect(r.log.map((l) => l.event).filter(Boolean)).toEqual(
      expect.arrayContaining(['child_stopping', 'child_stopped']),
    );
  });

  it('a second SIGTERM after the window: exit 1 at once, shutdown_forced logged', async () => {
    const r = await runChild('run', { CLOSE_MS: '30000', SIGNAL_REPEAT_WINDOW_MS: '100' }, async (pid) => {
      process.kill(pid, 'SIGTERM');
      await sleep(300);
      process.kill(pid, 'SIGTERM');
    });
    expect(r).toMatchObject({ code: 1, signal: null });
    expect(r.log.some((l) => l.event === 'shutdown_forced')).toBe(true);
    expect(r.log.some((l) => l.event === 'child_stopped')).toBe(false);
  });

  it('SHUTDOWN_TIMEOUT_MS passing: exit 1, shutdown_timed_out logged', async () => {
    const r = await runChild('run', { CLOSE_MS: '30000', SHUTDOWN_TIMEOUT_MS: '200' }, (pid) => {
      process.kill(pid, 'SIGTERM');
    });
    expect(r).toMatchObject({ code: 1, signal: null });
    expect(r.log.some((l) => l.event === 'shutdown_timed_out')).toBe(true);
  });

  it.each([
    ['throw', 'uncaught_exception', 'boom: thrown'],
    ['reject', 'unhandled_rejection', 'boom: rejected'],
  ])('crash (%s): exit 1, one fatal line', async (mode, event, message) => {
    const r = await runChild(mode, {}, () => undefined);
    expect(r).toMatchObject({ code: 1, signal: null });
    const fatal = r.log.filter((l) => l.level === 60);
    expect(fatal).toHaveLength(1);
    expect(fatal[0]).toMatchObject({ event, err: { message } });
  });
});
