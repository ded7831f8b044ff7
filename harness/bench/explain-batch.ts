// `npm run bench:explain -- [--batch N] [--wallets W]`: where one batched decision spends its
// time inside PostgreSQL. On a fresh database (created and dropped here) it sends one warm-up
// batch, then one measured batch of N transfers through apply_transfers() with auto_explain
// switched on for that session alone (nested statements, ANALYZE, BUFFERS, sent back to the
// client as notices), and prints each statement's plan with its timing.
import pg from 'pg';
import { parseFlags } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/run-cli.ts';
import { loadConfig } from '../../src/config/config.ts';
import { endPool, trackConnections } from '../../src/db/pool-close.ts';
import { bounded } from './bench-options.ts';
import { batchQuery, spreadTransfers } from './decision-call.ts';
import { withScratchDatabase } from './scratch-database.ts';

export const EXPLAIN_BATCH_DEFAULT = 64;
export const EXPLAIN_WALLETS_DEFAULT = 10_000;
/** Plans of statements that took at least this long in total are printed in full. */
export const EXPLAIN_PLAN_SHOWN_MS = 0.1;

await runCli(async () => {
  const usage = 'npm run bench:explain -- [--batch N] [--wallets W]';
  const { values } = parseFlags(
    process.argv.slice(2),
    { batch: { type: 'string' }, wallets: { type: 'string' } },
    usage,
  );
  const batch = bounded(values.batch, '--batch', 1, 1_000, EXPLAIN_BATCH_DEFAULT);
  const wallets = bounded(values.wallets, '--wallets', 2, 100_000, EXPLAIN_WALLETS_DEFAULT);
  const config = loadConfig();
  const scratch = {
    config,
    tag: 'explain',
    wallets,
    balanceMinor: 1_000_000n,
    onCreated: (name: string) => process.stderr.write(`database ${name} (dropped at the end)\n`),
  };
  await withScratchDatabase(scratch, async (databaseUrl) => {
    const pool = trackConnections(new pg.Pool({ connectionString: databaseUrl, max: 1, options: '-c TimeZone=UTC' }));
    pool.on('error', () => undefined);
    try {
      const client = await pool.connect();
      try {
        const warm = batchQuery(spreadTransfers(batch, wallets, 'warm'));
        await client.query(warm.text, warm.values);
        const notices: string[] = [];
        client.on('notice', (n) => notices.push(n.message ?? ''));
        await client.query(`LOAD 'auto_explain'`);
        await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
          SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_timing = on;
          SET auto_explain.log_level = notice; SET client_min_messages = notice`);
        const measured = batchQuery(spreadTransfers(batch, wallets, 'measured'));
        const startedMs = performance.now();
        const result = await client.query(measured.text, measured.values);
        const wallMs = performance.now() - startedMs;
        await client.query('RESET auto_explain.log_min_duration');
        process.stdout.write(
          `# apply_transfers() with ${batch} transfers over ${wallets} wallets: ${result.rowCount} answers, ` +
            `${wallMs.toFixed(1)} ms round trip (with auto_explain's own cost)\n\n`,
        );
        // One line per statement of the function, summed over its repeats (the advisory lock is
        // taken once per operation), then the full plans of the statements that cost something.
        const byStatement = new Map<string, { calls: number; ms: number; plan: string }>();
        for (const n of notices) {
          const ms = Number(/^duration: ([\d.]+) ms/.exec(n)?.[1] ?? NaN);
          const text = (
            /Query Text: ([\s\S]*?)\n(?=[A-Z][a-zA-Z ]+ {2}\(|[A-Z][a-zA-Z ]+ on |Result|Insert|Update|LockRows|Aggregate|Function Scan)/.exec(
              n,
            )?.[1] ?? n
          )
            .replace(/\s+/g, ' ')
            .trim();
          const entry = byStatement.get(text) ?? { calls: 0, ms: 0, plan: n };
          entry.calls += 1;
          entry.ms += Number.isFinite(ms) ? ms : 0;
          byStatement.set(text, entry);
        }
        const rows = [...byStatement.entries()].sort((a, b) => b[1].ms - a[1].ms);
        process.stdout.write('| ms | calls | statement |\n|---:|---:|---|\n');
        for (const [text, e] of rows)
          process.stdout.write(`| ${e.ms.toFixed(3)} | ${e.calls} | \`${text.slice(0, 110)}\` |\n`);
        process.stdout.write('\n');
        for (const [, e] of rows.filter(([, e]) => e.ms >= EXPLAIN_PLAN_SHOWN_MS))
          process.stdout.write(`${e.plan}\n\n`);
      } finally {
        client.release();
      }
    } finally {
      await endPool(pool);
    }
  });
});
