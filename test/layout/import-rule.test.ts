// The import rules of .dependency-cruiser.cjs (run by `npm test` as `npm run lint:imports`): the
// real tree passes, and a file that breaks a rule, in a scratch copy of the layout, is refused by
// name: a product file that imports a harness, a lock file that imports the ledger, an errors
// module that imports another product module.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

const DEPCRUISE = join(PROJECT_ROOT, 'node_modules', '.bin', 'depcruise');
const CONFIG = join(PROJECT_ROOT, '.dependency-cruiser.cjs');

async function cruise(cwd: string, paths: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(DEPCRUISE, [...paths, '--config', CONFIG], { cwd });
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

function writeTree(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

describe('the import rules', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'ft-import-rule-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('hold on the project as it is', async () => {
    const result = await cruise(PROJECT_ROOT, ['src', 'harness', 'test']);
    expect(result.code, result.output).toBe(0);
    expect(result.output).toContain('no dependency violations found');
  });

  it('refuse a product file that imports a harness, and allow the other direction', async () => {
    writeTree(scratch, {
      'tsconfig.json': JSON.stringify({ compilerOptions: { allowImportingTsExtensions: true, noEmit: true } }),
      'src/ledger/settle.ts': "import { fault } from '../../harness/chaos/fault.ts';\nexport const settle = fault;\n",
      'harness/chaos/fault.ts': 'export const fault = 1;\n',
      'harness/chaos/drive.ts': "import { settle } from '../../src/ledger/settle.ts';\nexport const drive = settle;\n",
    });
    const result = await cruise(scratch, ['src', 'harness']);
    expect(result.code).not.toBe(0);
    expect(result.output).toMatch(/product-imports-harness: src\/ledger\/settle\.ts → harness\/chaos\/fault\.ts/);
    expect(result.output).not.toContain('harness/chaos/drive.ts →');
  });

  it('refuse a lock file that imports the ledger, and an errors module that imports any product module', async () => {
    const root = join(scratch, 'layers');
    writeTree(root, {
      'tsconfig.json': JSON.stringify({ compilerOptions: { allowImportingTsExtensions: true, noEmit: true } }),
      'src/ledger/vocabulary.ts': "import { PREFIX } from '../errors.ts';\nexport const prefixed = PREFIX + 1;\n",
      'src/lock/lock-scripts.ts':
        "import { prefixed } from '../ledger/vocabulary.ts';\nexport const reply = prefixed;\n",
      'src/lock/watchdog.ts': "import { PREFIX } from '../errors.ts';\nexport const lost = PREFIX;\n",
      'src/config/settings.ts': 'export const MAX = 1;\n',
      'src/errors.ts': "import { MAX } from './config/settings.ts';\nexport const PREFIX = MAX;\n",
    });
    const result = await cruise(root, ['src']);
    expect(result.code).not.toBe(0);
    expect(result.output).toMatch(/lock-imports-ledger: src\/lock\/lock-scripts\.ts → src\/ledger\/vocabulary\.ts/);
    expect(result.output).toMatch(/errors-import-product: src\/errors\.ts → src\/config\/settings\.ts/);
    // Both may import the errors module.
    expect(result.output).not.toContain('src/lock/watchdog.ts →');
    expect(result.output).not.toContain('src/ledger/vocabulary.ts →');
  });
});
