// The bench's own checks can fail: a run whose ledger is off, or whose transfers did not all
// apply, or whose queue kept failed jobs, is refused (so a passing bench means something).
// An intake run that left a request undecided, or whose feed misses an event, is refused too.
// Against a real sandbox on the configured PostgreSQL and Redis; the transfers are applied
// with the same decision call the db-ceiling case uses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { benchBalanceMinor, benchWorkload } from '../../../harness/bench/bench-workload.ts';
import { decide } from '../../../harness/bench/decision-call.ts';
import { benchRunId, Sandbox, sandboxNames } from '../../../harness/bench/sandbox.ts';
import { verifyIntake, verifyJobs, verifyLedger } from '../../../harness/bench/verify.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { requestTransfers } from '../../../src/intake/intake.ts';
import { validateTransferRequest } from '../../../src/ledger/transfer-request.ts';

const TRANSFERS = 40;
const WALLETS = 20;

describe('bench verification', () => {
  let sandbox: Sandbox;

  beforeAll(async () => {
    sandbox = await Sandbox.create({
      config: loadConfig(),
      names: sandboxNames(benchRunId(), 'db-ceiling', 1),
      wallets: WALLETS,
      balanceMinor: benchBalanceMinor(TRANSFERS),
      withQueue: false,
    });
    const pool = sandbox.requirePool();
    for (const wire of benchWorkload({
      transfers: TRANSFERS,
      wallets: WALLETS,
      run: 1,
      hot: false,
      operationPrefix: 'r1-',
    })) {
      const verdict = validateTransferRequest(wire, 10n ** 15n);
      if (!verdict.ok) throw new Error(verdict.reason);
      expect(await decide(pool, verdict.request)).toBe('applied');
    }
  });
  afterAll(() => sandbox.dispose());

  it('passes a run where every transfer applied and the ledger reconciles', async () => {
    const v = await verifyLedger(sandbox, 'r1-', TRANSFERS, { failedJobs: 0, jobsLeft: 0, completedJobs: TRANSFERS });
    expect(v.problems).toEqual([]);
    expect(v).toMatchObject({ ok: true, applied: TRANSFERS, invariantsHeld: true });
  });

  it('refuses a run with fewer transfers applied than sent, or with failed or leftover jobs', async () => {
    const v = await verifyLedger(sandbox, 'r1-', TRANSFERS + 1, {
      failedJobs: 1,
      jobsLeft: 2,
      completedJobs: TRANSFERS,
    });
    expect(v.ok).toBe(false);
    expect(v.problems.join('; ')).toMatch(
      /40 transfers applied, expected 41.*1 jobs failed.*2 jobs still queued.*40 jobs completed, expected 41/,
    );
    expect(verifyJobs(TRANSFERS, { failedJobs: 1, jobsLeft: 0, completedJobs: TRANSFERS - 1 }).ok).toBe(false);
  });

  it('refuses a run whose ledger does not reconcile', async () => {
    const pool = sandbox.requirePool();
    // Money from nowhere: a balance that no ledger entry explains.
    await pool.query("UPDATE wallets SET balance = balance + 1 WHERE id = 'wallet-1'");
    try {
      const v = await verifyLedger(sandbox, 'r1-', TRANSFERS, null);
      expect(v.ok).toBe(false);
      expect(v.invariantsHeld).toBe(false);
      expect(v.problems.join('; ')).toMatch(/invariant violated: conservation/);
    } finally {
      await pool.query("UPDATE wallets SET balance = balance - 1 WHERE id = 'wallet-1'");
    }
  });
});

describe('bench verification of the intake cases', () => {
  const REQUESTS = 3;
  let sandbox: Sandbox;
  const wires = benchWorkload({ transfers: REQUESTS, wallets: WALLETS, run: 1, hot: false, operationPrefix: 'r1-' });
  const decideOne = async (index: number) => {
    const verdict = validateTransferRequest(wires[index], 10n ** 15n);
    if (!verdict.ok) throw new Error(verdict.reason);
    expect(await decide(sandbox.requirePool(), verdict.request)).toBe('applied');
  };

  beforeAll(async () => {
    sandbox = await Sandbox.create({
      config: loadConfig(),
      names: sandboxNames(benchRunId(), 'e2e-intake-100', 1),
      wallets: WALLETS,
      balanceMinor: benchBalanceMinor(REQUESTS),
      withQueue: false,
    });
    expect(await requestTransfers(sandbox.requirePool(), wires, 10n ** 15n)).toEqual([
      'requested',
      'requested',
      'requested',
    ]);
  });
  afterAll(() => sandbox.dispose());

  it('refuses a run that left a request undecided, and passes once every request is decided with one feed event', async () => {
    await decideOne(0);
    await decideOne(1);
    const partial = await verifyIntake(sandbox, 'r1-', REQUESTS);
    expect(partial.problems).toEqual(['1 requests not decided', '2 operations in the outcome feed, expected 3']);
    expect(partial.feedEvents).toBe(2);

    await decideOne(2);
    const full = await verifyIntake(sandbox, 'r1-', REQUESTS);
    expect(full.problems).toEqual([]);
    expect(full.feedEvents).toBe(REQUESTS);
    // The requests are counted against what the bench sent: one more is refused.
    expect((await verifyIntake(sandbox, 'r1-', REQUESTS + 1)).problems).toContain(
      '3 requests in the intake, expected 4',
    );
  });
});
