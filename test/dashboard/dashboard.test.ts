// The queue dashboard in a real headless Chromium. Hostile messages go onto a private queue and
// through the real worker, so the failed set holds jobs with their `invalid_request: …` reasons;
// the dashboard, read-only as by default, must show the queue, its failed jobs and their reasons,
// offer no action that changes anything, and its API must refuse such actions. A screenshot of
// the failed jobs goes to .runs/test-output/dashboard.png.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningDashboard, startDashboard } from '../../src/dashboard/server.ts';
import { launchChromium, requireChromium, type TestBrowser, testOutputPath } from '../support/chromium.ts';
import { createPipeline, type Pipeline } from '../support/pipeline.ts';
import { uniqueName } from '../support/test-db.ts';

const TEST_TIMEOUT_MS = 180_000;
/** How long the page may take to show something, on a loaded machine. */
const UI_WAIT_MS = 60_000;
const JOB_SETTLE_TIMEOUT_MS = 60_000;
/** Tall enough for the three failed jobs' cards. */
const SCREEN = { width: 1366, height: 1040 };

const INVALID: { label: string; data: unknown; reason: string }[] = [
  {
    label: 'decimal point',
    data: { operationId: 'dash-point', from: 'w1', to: 'w2', amount: '5.5' },
    reason: 'invalid_request: amount must be a string of decimal digits',
  },
  {
    label: 'same wallet',
    data: { operationId: 'dash-same', from: 'w1', to: 'w1', amount: '5' },
    reason: 'invalid_request: from and to are the same wallet',
  },
  {
    label: 'extra field',
    data: { operationId: 'dash-extra', from: 'w1', to: 'w2', amount: '5', balance: '1000000' },
    reason: 'invalid_request: ',
  },
];
const VALID = [
  { operationId: 'dash-ok-1', from: 'w1', to: 'w2', amount: '5' },
  { operationId: 'dash-ok-2', from: 'w2', to: 'w1', amount: '7' },
];

let p: Pipeline;
let dashboard: RunningDashboard;
let browser: TestBrowser;
let failedJobIds: string[];

beforeAll(async () => {
  requireChromium(); // before any work: a missing browser is a failure that says how to install it
  // A readable private queue name: it is what the screenshot shows.
  p = await createPipeline({ QUEUE_NAME: uniqueName('transfers') });
  await p.seed(2, 1_000n);
  await p.startWorker();
  const invalidJobs = [];
  for (const message of INVALID) invalidJobs.push(await p.addRaw(message.data));
  const validJobs = [];
  for (const message of VALID) validJobs.push(await p.addRaw(message));
  const settled = await Promise.all(invalidJobs.map((job) => p.settle(job, JOB_SETTLE_TIMEOUT_MS)));
  settled.forEach((result, i) => {
    expect(result, INVALID[i]?.label).toMatchObject({ ok: false });
    expect(result.ok ? '' : result.reason, INVALID[i]?.label).toContain(INVALID[i]?.reason);
  });
  for (const job of validJobs) expect(await p.result(job, JOB_SETTLE_TIMEOUT_MS)).toMatchObject({ outcome: 'applied' });
  failedJobIds = invalidJobs.map((job) => String(job.id));

  dashboard = await startDashboard({
    host: '127.0.0.1',
    port: 0,
    queueNames: [p.config.queueName],
    redisUrl: p.config.redisUrl,
    readOnly: true,
    logger: pino({ level: 'silent' }),
  });
  browser = await launchChromium(SCREEN);
}, TEST_TIMEOUT_MS);

afterAll(async () => {
  await browser?.close();
  await dashboard?.close();
  await p?.close();
});

async function api(method: 'PUT' | 'POST', path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(new URL(path, dashboard.url), {
    method,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body ?? {}),
  });
  return { status: response.status, text: await response.text() };
}

describe('npm run dashboard, read-only, in Chromium', { timeout: TEST_TIMEOUT_MS }, () => {
  it('lists the queue with its counts on the overview', async () => {
    const page = await browser.context.newPage();
    try {
      await page.goto(dashboard.url);
      await page.getByText(p.config.queueName).first().waitFor({ state: 'visible', timeout: UI_WAIT_MS });
      expect(await page.title()).toContain('fenced transfers');
    } finally {
      await page.close();
    }
  });

  it('shows the failed jobs with their invalid_request reasons, and offers no action', async () => {
    const page = await browser.context.newPage();
    try {
      await page.goto(
        new URL(`queue/${encodeURIComponent(p.config.queueName)}?status=failed`, dashboard.url).toString(),
      );
      await page.getByText(p.config.queueName).first().waitFor({ state: 'visible', timeout: UI_WAIT_MS });
      for (const message of INVALID.filter((m) => m.reason !== 'invalid_request: ')) {
        await page.getByText(message.reason).first().waitFor({ state: 'visible', timeout: UI_WAIT_MS });
      }
      // Every failed job's card is there (the list shows its id as #<id>).
      for (const id of failedJobIds)
        await page.getByText(`#${id}`, { exact: true }).waitFor({ state: 'visible', timeout: UI_WAIT_MS });
      expect(await page.getByText('invalid_request: ').count()).toBe(INVALID.length);

      // A writable board shows "Retry all" and "Clean all" above the failed jobs; this one must not.
      expect(
        await page
          .getByRole('button', { name: /retry|clean|promote|delete|remove|empty|obliterate|pause|add/i })
          .count(),
      ).toBe(0);

      await page.screenshot({ path: testOutputPath('dashboard.png') });
    } finally {
      await page.close();
    }
  });

  it('refuses every action that would change the queue or a job, and nothing changes', async () => {
    const queue = encodeURIComponent(p.config.queueName);
    const firstFailed = failedJobIds[0];
    const countsBefore = await p.queue.getJobCounts();
    const refused = [
      await api('PUT', `api/queues/${queue}/retry/failed`),
      await api('PUT', `api/queues/${queue}/clean/failed`),
      await api('PUT', `api/queues/${queue}/${firstFailed}/retry`),
      await api('PUT', `api/queues/${queue}/${firstFailed}/clean`),
      await api('PUT', `api/queues/${queue}/pause`),
      await api('PUT', `api/queues/${queue}/empty`),
      await api('PUT', `api/queues/${queue}/obliterate`),
      await api('POST', `api/queues/${queue}/add`, { name: 'transfer', data: VALID[0], options: {} }),
    ];
    for (const response of refused) {
      expect(response.status, response.text).toBe(405);
      expect(response.text).toContain('QUEUE_READ_ONLY');
    }
    // "Pause all" answers but passes over read-only queues.
    await api('PUT', 'api/queues/pause');
    expect(await p.queue.isPaused()).toBe(false);
    expect(await p.queue.getJobCounts()).toEqual(countsBefore);
    expect(countsBefore.failed).toBe(INVALID.length);
    const job = await p.queue.getJob(firstFailed ?? '');
    expect(job?.failedReason).toMatch(/^invalid_request: /);
  });
});
