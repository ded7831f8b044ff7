// The package's two public entries, loaded in a child node process under tsx with hooks that
// refuse BullMQ and ioredis (test/support/queue-free/): the intake's entry loads without either,
// by import or by require(); the full entry, under the same hooks, is refused for loading BullMQ,
// and without them loads it: so the check can fail, and does when the intake half reaches the queue.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';
import { describeRun, lastJsonLine, runCommand } from '../support/cli-process.ts';

const QUEUE_FREE = join(PROJECT_ROOT, 'test', 'support', 'queue-free');
const REGISTER = join(QUEUE_FREE, 'register.mjs');
const IMPORT_ENTRY = join(QUEUE_FREE, 'import-entry.mjs');

interface Imported {
  exports: string[];
  required: string[];
}

function importUnderTsx(entry: string, refuseQueue: boolean) {
  const hooks = refuseQueue ? ['--import', REGISTER] : [];
  return runCommand(process.execPath, ['--import', 'tsx', ...hooks, IMPORT_ENTRY, entry], {});
}

describe('fenced-transfers/intake (src/intake-entry.ts)', () => {
  it('loads neither BullMQ nor ioredis, and exports the intake, the feed and the errors', async () => {
    const run = await importUnderTsx('src/intake-entry.ts', true);
    expect(run.code, describeRun(run)).toBe(0);
    const imported = lastJsonLine(run) as Imported;
    expect(imported.required).toEqual([]);
    expect(imported.exports).toEqual(
      expect.arrayContaining([
        'requestTransfer',
        'requestOperation',
        'readOutcomes',
        'followOutcomes',
        'IntakeConflictError',
        'InvalidTransferError',
        'OutcomeFeedPrunedError',
      ]),
    );
    expect(imported.exports).not.toContain('enqueueTransfer');
  });
});

describe('fenced-transfers (src/index.ts)', () => {
  it('is refused by the same hooks: it loads BullMQ and ioredis', async () => {
    const run = await importUnderTsx('src/index.ts', true);
    expect(run.code, describeRun(run)).not.toBe(0);
    // The loader resolves sibling imports concurrently: whichever of the two comes first is refused.
    expect(run.stderr).toMatch(/refused to load \S*node_modules\/(bullmq|ioredis)\//);
  });

  it('without the hooks, exports the intake entry and enqueueing straight, with BullMQ and ioredis loaded', async () => {
    const [full, intake] = await Promise.all([
      importUnderTsx('src/index.ts', false),
      importUnderTsx('src/intake-entry.ts', false),
    ]);
    expect(full.code, describeRun(full)).toBe(0);
    const imported = lastJsonLine(full) as Imported;
    expect(imported.exports).toEqual(expect.arrayContaining([...(lastJsonLine(intake) as Imported).exports]));
    expect(imported.exports).toEqual(expect.arrayContaining(['enqueueTransfer', 'enqueueOperation', 'TransferQueues']));
    expect(imported.required.some((file) => /node_modules\/ioredis\//.test(file))).toBe(true);
  });
});
