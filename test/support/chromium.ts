// A real headless Chromium for browser tests: Debian's /usr/bin/chromium driven by playwright-core
// (which never downloads a browser here), in a fresh profile folder, with the network features a
// test has no use for switched off. Missing Chromium is a failure with the command that installs
// it, never a skipped test.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium } from 'playwright-core';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

export const CHROMIUM_PATH = '/usr/bin/chromium';
/** Where browser tests leave their screenshots (git-ignored, like all of .runs/). */
export const TEST_OUTPUT_DIR = join(PROJECT_ROOT, '.runs', 'test-output');
export const BROWSER_LAUNCH_TIMEOUT_MS = 60_000;

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface TestBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

export function requireChromium(): string {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is not installed (${CHROMIUM_PATH} is missing), and the dashboard test needs a real browser: ` +
        'install it with `apt-get install -y chromium` as root (`.ci/run` does this when it is missing).',
    );
  }
  return CHROMIUM_PATH;
}

export async function launchChromium(viewport = { width: 1440, height: 900 }): Promise<TestBrowser> {
  const executablePath = requireChromium();
  // launchPersistentContext is playwright's way to give Chromium its own --user-data-dir.
  const profileDir = mkdtempSync(join(tmpdir(), 'ft-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(profileDir, {
      executablePath,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport,
      timeout: BROWSER_LAUNCH_TIMEOUT_MS,
    });
    return {
      context,
      async close() {
        await context.close();
        rmSync(profileDir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(profileDir, { recursive: true, force: true });
    throw err;
  }
}

export function testOutputPath(fileName: string): string {
  mkdirSync(TEST_OUTPUT_DIR, { recursive: true });
  return join(TEST_OUTPUT_DIR, fileName);
}
