// `npm run bench:call-cost -- [--calls N] [--in-flight C] [--rounds R]`: what one decision call
// costs the calling process's CPU, by client. On a fresh database (created and dropped here) it
// sends the worker's decision, apply_transfers(), the same way in three variants, in rounds
// that alternate them so the machine's drift falls on all alike:
//   - prisma-1:  one transfer per call through Prisma ($queryRaw, the worker's own
//                applyTransfers()), as a worker sends it with TRANSFER_BATCH_MAX=1;
//   - pg-1:      the same SQL and arguments through a plain `pg` pool (db-ceiling's client);
//   - prisma-64: 64 transfers per call through Prisma, as a batching worker sends them.
// For each it prints this process's CPU (user + system, from process.cpuUsage()) per transfer
// and the transfers/s it reached: PostgreSQL's own CPU is not in those figures, so the
// difference between prisma-1 and pg-1 is the client's alone.
import pg from 'pg';
import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { endPool, trackConnections } from '../../src/db/pool-close.ts';
import { closePrisma, createPrisma } from '../../src/db/prisma.ts';
import { applyTransfers } from '../../src/ledger/apply-transfer.ts';
import { bounded } from './bench-options.ts';
import { batchQuery, spreadTransfers, UNLOCKED_FENCE, UNLOCKED_LEASE_ID } from './decision-call.ts';
import { median } from './measure.ts';
import { withScratchDatabase } from './scratch-database.ts';

const WALLETS = 10_000;
const BATCH = 64;
const WARMUP_CALLS = 300;
const USAGE = 'npm run bench:call-cost -- [--calls N] [--in-flight C] [--rounds R]';

type Variant = 'prisma-1' | 'pg-1' | 'prisma-64';
const VARIANTS: readonly Variant[] = ['prisma-1', 'pg-1', 'prisma-64'];

interface Measure {
  readonly cpuUsPerTransfer: number;
  readonly transfersPerS: number;
}

await runCli(async () => {
  const { values } = parseFlags(
    process.argv.slice(2),
    {
      calls: { type: 'string' },
      'in-flight': { type: 'string' },
      rounds: { type: 'string' },
    },
    USAGE,
  );
  const calls = bounded(values.calls, '--calls', 100, 100_000, 4_000);
  const inFlight = bounded(values['in-flight'], '--in-flight', 1, 64, 8);
  const rounds = bounded(values.rounds, '--rounds', 1, 20, 3);
  const config = loadConfig();
  const scratch = {
    config,
    tag: 'callcost',
    wallets: WALLETS,
    // Funded so that every transfer of every round applies.
    balanceMinor: 1_000_000_000n,
    onCreated: (name: string) => process.stderr.write(`database ${name} (dropped at the end)\n`),
  };
  await withScratchDatabase(scratch, async (databaseUrl) => {
    const prisma = createPrisma({ ...config, databaseUrl, dbPoolMax: inFlight });
    const pool = trackConnections(
      new pg.Pool({ connectionString: databaseUrl, max: inFlight, options: '-c TimeZone=UTC' }),
    );
    pool.on('error', () => undefined);
    try {
      let serial = 0;
      const send = async (variant: Variant): Promise<number> => {
        const size = variant === 'prisma-64' ? BATCH : 1;
        const requests = spreadTransfers(size, WALLETS, 'cc', serial);
        serial += size;
        if (variant === 'pg-1') {
          const { text, values } = batchQuery(requests);
          await pool.query(text, values);
          return size;
        }
        const results = await applyTransfers(
          prisma,
          requests.map((request) => ({ request, fence: UNLOCKED_FENCE, leaseId: UNLOCKED_LEASE_ID })),
        );
        const notApplied = results.filter((x) => x.outcome !== 'applied');
        if (notApplied.length > 0)
          throw new Error(`${variant}: ${notApplied.length} transfers not applied (${notApplied[0]?.outcome})`);
        return size;
      };
      const measure = async (variant: Variant, callCount: number): Promise<Measure> => {
        let started = 0;
        let transfers = 0;
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: inFlight }, async () => {
            while (started < callCount) {
              started += 1;
              // Not `transfers += await ...`: that reads the total before the await and loses the
              // other loops' additions made meanwhile.
              const sent = await send(variant);
              transfers += sent;
            }
          }),
        );
        const cpu = process.cpuUsage(cpu0);
        const seconds = (performance.now() - t0) / 1_000;
        return { cpuUsPerTransfer: (cpu.user + cpu.system) / transfers, transfersPerS: transfers / seconds };
      };
      for (const variant of VARIANTS) await measure(variant, WARMUP_CALLS);
      const byVariant = new Map<Variant, Measure[]>(VARIANTS.map((v) => [v, []]));
      for (let round = 1; round <= rounds; round++) {
        for (const variant of VARIANTS) {
          // The batched variant sends as many transfers as the others, in 64 times fewer calls.
          const m = await measure(variant, variant === 'prisma-64' ? Math.ceil(calls / BATCH) : calls);
          byVariant.get(variant)?.push(m);
          process.stderr.write(
            `round ${round}/${rounds} ${variant}: ${m.cpuUsPerTransfer.toFixed(0)} µs CPU per transfer, ${m.transfersPerS.toFixed(0)} transfers/s\n`,
          );
        }
      }
      process.stdout.write(
        `# ${calls} transfers per variant and round, ${inFlight} calls in flight, medians of ${rounds} rounds\n\n`,
      );
      process.stdout.write("| variant | this process's CPU per transfer (µs) | transfers/s |\n|---|---:|---:|\n");
      for (const variant of VARIANTS) {
        const ms = byVariant.get(variant) ?? [];
        process.stdout.write(
          `| ${variant} | ${(median(ms.map((m) => m.cpuUsPerTransfer)) ?? NaN).toFixed(0)} | ${(median(ms.map((m) => m.transfersPerS)) ?? NaN).toFixed(0)} |\n`,
        );
      }
    } finally {
      await closePrisma(prisma);
      await endPool(pool);
    }
  });
});
