// `npm run bench:decision-cost -- [--batch N] [--batches B] [--rounds R]`: what one decision
// costs PostgreSQL, by kind. On a fresh database (created and dropped here) one connection sends
// the worker's own calls (applyTransfers(), applyPayments()) in batches of N, in rounds that
// alternate the kinds so the machine's drift falls on all alike:
//   - transfer: N transfers through apply_transfers();
//   - hold:     N holds through apply_payments() (same payers, payees and amounts' shape);
//   - capture:  the N captures of the holds of the round just before, whole;
//   - single:   N transfers one call each through apply_transfer(), the single entry (a batch
//               of one through apply_transfers() is `transfer` with --batch 1).
// For each it prints the server process's CPU (user + system, from /proc/<pid>/stat of the
// backend serving the connection) per operation, and its ratio to a transfer's: the figure the
// e2e-payments case's PostgreSQL share is made of, without the queue, the lock or the workers.
import { readFile } from 'node:fs/promises';
import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { closePrisma, createPrisma, type PrismaClient } from '../../src/db/prisma.ts';
import { UsageError } from '../../src/errors.ts';
import { applyPayments } from '../../src/ledger/apply-payments.ts';
import { applyTransfer, applyTransfers } from '../../src/ledger/apply-transfer.ts';
import type { ApplyResult } from '../../src/ledger/outcome.ts';
import type { CaptureRequest, HoldRequest } from '../../src/ledger/transfer-request.ts';
import { bounded } from './bench-options.ts';
import { spreadTransfers, UNLOCKED_FENCE, UNLOCKED_LEASE_ID } from './decision-call.ts';
import { median } from './measure.ts';
import { withScratchDatabase } from './scratch-database.ts';

const WALLETS = 10_000;
const USAGE =
  'npm run bench:decision-cost -- [--batch N] [--batches B] [--rounds R] [--kinds transfer,hold,capture,single]';
const KINDS = ['transfer', 'hold', 'capture', 'single'] as const;
type Kind = (typeof KINDS)[number];
const HOLD_EXPIRES_IN_MS = 86_400_000;
const HOLD_EXPIRY_MAX_MS = 604_800_000;

/** CPU seconds (user + system) of a process so far, from /proc (Linux). */
async function processCpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name, which is in parentheses and may hold spaces.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return ticks / 100;
}

function allApplied(kind: Kind, results: readonly ApplyResult[]): void {
  const bad = results.filter((r) => r.outcome !== 'applied');
  if (bad.length > 0) throw new Error(`${kind}: ${bad.length} not applied (${bad[0]?.outcome})`);
}

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    { batch: { type: 'string' }, batches: { type: 'string' }, rounds: { type: 'string' }, kinds: { type: 'string' } },
    USAGE,
  );
  const kinds = (values.kinds ?? KINDS.join(',')).split(',') as Kind[];
  if (kinds.some((k) => !KINDS.includes(k)) || (kinds.includes('capture') && !kinds.includes('hold'))) {
    throw new UsageError(`--kinds: a list of ${KINDS.join(', ')} (capture needs hold)\nusage: ${USAGE}`);
  }
  const batch = bounded(values.batch, '--batch', 1, 1000, 32);
  const batches = bounded(values.batches, '--batches', 10, 100_000, 400);
  const rounds = bounded(values.rounds, '--rounds', 1, 20, 5);
  const config = loadConfig();
  const scratch = {
    config,
    tag: 'decisioncost',
    wallets: WALLETS,
    balanceMinor: 1_000_000_000n,
    onCreated: (name: string) => process.stderr.write(`database ${name} (dropped at the end)\n`),
  };
  await withScratchDatabase(scratch, async (databaseUrl) => {
    const prisma: PrismaClient = createPrisma({ ...config, databaseUrl, dbPoolMax: 1 });
    try {
      const [backend] = await prisma.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      if (backend === undefined) throw new Error('no backend pid');
      const { pid } = backend;
      let serial = 0;
      let holdsOfLastRound: HoldRequest[][] = [];
      const lease = { fence: UNLOCKED_FENCE, leaseId: UNLOCKED_LEASE_ID };
      const options = { holdExpiryMaxMs: HOLD_EXPIRY_MAX_MS };
      const runKind = async (kind: Kind, count: number): Promise<number> => {
        const cpu0 = await processCpuSeconds(pid);
        const holds: HoldRequest[][] = [];
        for (let b = 0; b < count; b++) {
          if (kind === 'capture') {
            const of = holdsOfLastRound[b];
            if (of === undefined) throw new Error('capture: no holds to capture');
            const captures: CaptureRequest[] = of.map((h) => ({
              kind: 'capture',
              operationId: `${h.operationId}-c`,
              from: h.from,
              hold: h.operationId,
              amountMinor: null,
            }));
            allApplied(
              kind,
              await applyPayments(
                prisma,
                captures.map((request) => ({ request, ...lease })),
                options,
              ),
            );
            continue;
          }
          const transfers = spreadTransfers(batch, WALLETS, kind === 'hold' ? 'h' : 't', serial);
          serial += batch;
          if (kind === 'single') {
            const results: ApplyResult[] = [];
            for (const request of transfers) {
              results.push(await applyTransfer(prisma, request, lease.fence, lease.leaseId));
            }
            allApplied(kind, results);
            continue;
          }
          if (kind === 'transfer') {
            allApplied(
              kind,
              await applyTransfers(
                prisma,
                transfers.map((request) => ({ request, ...lease })),
              ),
            );
            continue;
          }
          const of: HoldRequest[] = transfers.map((t) => ({
            kind: 'hold',
            operationId: t.operationId,
            from: t.from,
            to: t.to,
            amountMinor: t.amountMinor,
            currency: t.currency,
            expiresInMs: HOLD_EXPIRES_IN_MS,
            expiresAt: null,
          }));
          allApplied(
            kind,
            await applyPayments(
              prisma,
              of.map((request) => ({ request, ...lease })),
              options,
            ),
          );
          holds.push(of);
        }
        if (kind === 'hold') holdsOfLastRound = holds;
        return (await processCpuSeconds(pid)) - cpu0;
      };
      // Warm-up: every kind once, small.
      for (const kind of kinds) await runKind(kind, Math.max(10, Math.floor(batches / 10)));
      const usPerOp = new Map<Kind, number[]>(kinds.map((k) => [k, []]));
      for (let round = 1; round <= rounds; round++) {
        for (const kind of kinds) {
          const seconds = await runKind(kind, batches);
          const us = (seconds * 1e6) / (batches * batch);
          usPerOp.get(kind)?.push(us);
          process.stderr.write(`round ${round}/${rounds} ${kind}: ${us.toFixed(1)} µs PostgreSQL CPU per operation\n`);
        }
      }
      const transferUs = median(usPerOp.get('transfer') ?? []) ?? NaN;
      process.stdout.write(
        `# ${batches} batches of ${batch} per kind and round, one connection, medians of ${rounds} rounds\n\n`,
      );
      process.stdout.write('| kind | PostgreSQL CPU per operation (µs) | to a transfer |\n|---|---:|---:|\n');
      for (const kind of kinds) {
        const us = median(usPerOp.get(kind) ?? []) ?? NaN;
        process.stdout.write(`| ${kind} | ${us.toFixed(1)} | ${(us / transferUs).toFixed(3)} |\n`);
      }
    } finally {
      await closePrisma(prisma);
    }
  });
});
