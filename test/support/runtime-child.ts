// A process run by src/ops/process-runtime.ts with nothing but the runtime: its probes always
// pass, it owns one closing step that takes CLOSE_MS (a timer, so it keeps the process alive),
// and it prints `running` once it works. With argv[2] = `throw` or `reject` it then crashes with
// an uncaught exception or an unhandled rejection. Its log goes to stderr, as a product process's
// does. Used by test/ops/process-runtime.test.ts to check the real signals and exit codes.
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../../src/log/logger.ts';
import { HealthMonitor } from '../../src/ops/health-monitor.ts';
import { ProcessRuntime } from '../../src/ops/process-runtime.ts';

const mode = process.argv[2] ?? 'run';
const logger = createLogger('info', 'runtime-child');
const runtime = new ProcessRuntime({
  logger,
  monitor: new HealthMonitor({ probes: [async () => ({ ok: true })], logger }),
  startupTimeoutMs: 10_000,
  shutdownTimeoutMs: Number(process.env.SHUTDOWN_TIMEOUT_MS ?? 60_000),
  signalRepeatWindowMs: Number(process.env.SIGNAL_REPEAT_WINDOW_MS ?? 1_000),
});

process.exitCode = await runtime.run({
  listen: async () => undefined,
  open: async () => undefined,
  begin: () => {
    process.stdout.write('running\n');
    if (mode === 'throw')
      setTimeout(() => {
        throw new Error('boom: thrown');
      }, 10);
    if (mode === 'reject') void Promise.reject(new Error('boom: rejected'));
  },
  readiness: () => ({ ready: true }),
  stopping: (signal) => {
    logger.info({ event: 'child_stopping', signal }, 'stopping');
    return 'graceful';
  },
  closing: [{ name: 'slow step', close: () => sleep(Number(process.env.CLOSE_MS ?? 0)) }],
  stopped: () => logger.info({ event: 'child_stopped' }, 'stopped'),
});
