// The relay's login role (`npm run db:relay-role`). Connected as it, a relay's whole job works
// through its functions (claim first sends and due re-sends, count a lost add, record the give-up
// of a re-send its claim took, sequence and read the feed, take and move the publisher's cursor,
// the backlog), and every other
// statement fails with 42501: reading or writing any table directly, the decisions, the intake's
// request functions, the redrive's update. Control: a privilege granted by hand (UPDATE on
// transfer_requests) is seen by the same check, and the command takes it away again.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRelayRole, expectedRelayPrivileges, RELAY_FUNCTIONS } from '../../src/db/relay-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { RelayRoleError } from '../../src/errors.ts';
import { requestTransfers } from '../../src/intake/intake.ts';
import { readOutcomes, sequenceOutcomeFeed } from '../../src/intake/outcome-feed.ts';
import {
  OUTCOME_CURSOR_NAME_PATTERN,
  OUTCOME_CURSORS_MAX,
  OUTCOMES_QUEUE_CURSOR,
} from '../../src/intake/outcome-publisher.ts';
import { intakeBacklog } from '../../src/intake/relay.ts';
import { describeRun, lastJsonLine, runSource } from '../support/cli-process.ts';
import { createTestDatabase, type TestDatabase, uniqueName } from '../support/test-db.ts';

const PASSWORD = 'relay-role-test-password-42';
let db: TestDatabase;
let relayRole: string;
let asRelay: pg.Client;

async function sqlState(client: pg.ClientBase, sql: string): Promise<string> {
  try {
    await client.query(sql);
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

const TABLES = [
  'transfer_requests',
  'transfers',
  'wallets',
  'ledger_entries',
  'outcome_events',
  'outcome_pending',
  'outcome_cursors',
  'holds',
  'split_legs',
];

/** What a relay must never do: the tables directly, the decisions, the intake, the redrive's update. */
const FORBIDDEN = TABLES.flatMap((t) => [`SELECT * FROM ${t}`, `DELETE FROM ${t}`, `TRUNCATE ${t}`]).concat([
  'UPDATE transfer_requests SET lost_count = lost_count + 1',
  'UPDATE transfer_requests SET given_up_at = NULL, send_count = send_count + 1',
  "UPDATE transfer_requests SET decided_at = now() WHERE operation_id = 'r-1'",
  'UPDATE outcome_cursors SET position = 0',
  'UPDATE wallets SET balance = balance + 1',
  "INSERT INTO transfer_requests (operation_id, request_hash, from_wallet, to_wallet, amount) VALUES ('forged', repeat('0', 64), 'w1', 'w2', 1)",
  "INSERT INTO outcome_events (position, operation_id, kind, from_wallet, to_wallet, amount, decided_at) VALUES (99, 'x', 'applied', 'w1', 'w2', 1, now())",
  "INSERT INTO ledger_entries (operation_id, wallet_id, kind, amount) VALUES ('forged', 'w1', 'credit', 1000)",
  "SELECT * FROM apply_transfers(ARRAY['f1'], ARRAY[repeat('0', 64)], ARRAY['w1'], ARRAY['w2'], ARRAY[1]::bigint[], ARRAY[NULL]::text[], ARRAY[1]::bigint[], ARRAY['00000000-0000-4000-8000-000000000001']::uuid[])",
  'SELECT holds_expire(10)',
  "SELECT request_transfer('raw-1', 'w1', 'w2', 5, NULL)",
  'CREATE TABLE mine (x int)',
  'CREATE TEMPORARY TABLE mine (x int)',
]);

async function refusals(client: pg.ClientBase, statements: readonly string[]): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const s of statements) out[s] = await sqlState(client, s);
  return out;
}

const allRefused = (statements: readonly string[]) => Object.fromEntries(statements.map((s) => [s, '42501']));

beforeAll(async () => {
  db = await createTestDatabase('ft_relayrole');
  relayRole = uniqueName('ft_rl');
});

afterAll(async () => {
  await asRelay?.end().catch(() => undefined);
  await db.drop();
  await dropWorkerRole(db.url, relayRole);
});

describe('npm run db:relay-role', () => {
  it("creates a login role with exactly CONNECT, USAGE, SELECT on _prisma_migrations and EXECUTE on the relay's functions; never prints the password", async () => {
    const run = await runSource('src/cli/relay-role.ts', ['--role', relayRole], {
      DATABASE_URL: db.url,
      RELAY_DB_PASSWORD: PASSWORD,
    });
    expect(run.code, describeRun(run)).toBe(0);
    const result = lastJsonLine(run) as { role: string; created: boolean; privileges: string[] };
    expect(result).toMatchObject({ role: relayRole, created: true });
    expect(result.privileges).toEqual(expectedRelayPrivileges(db.name, 'public'));
    expect(result.privileges).toHaveLength(3 + RELAY_FUNCTIONS.length);
    expect(result.privileges).toContain('FUNCTION public.relay_claim_first_sends(integer) EXECUTE');
    expect(result.privileges).toContain('TABLE public._prisma_migrations SELECT');
    expect(`${run.stdout}${run.stderr}`).not.toContain(PASSWORD);
    asRelay = new pg.Client({ connectionString: roleUrl(db.url, relayRole, PASSWORD) });
    await asRelay.connect();
  });

  it("does a relay's whole job through its functions, trace context included", async () => {
    await requestTransfers(db.pg, [{ operationId: 'r-1', from: 'w1', to: 'w2', amount: '5' }], 1_000n);
    await db.pg.query(
      `UPDATE transfer_requests SET trace_context = '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}' WHERE operation_id = 'r-1'`,
    );
    const first = await asRelay.query(
      'SELECT operation_id, amount::text AS amount, send_count, trace_context FROM relay_claim_first_sends(10)',
    );
    expect(first.rows).toEqual([
      {
        operation_id: 'r-1',
        amount: '5',
        send_count: 1,
        trace_context: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      },
    ]);
    // The publisher's lookup of the producers' traces, for the named requests that carry one.
    const traces = await asRelay.query(
      "SELECT operation_id, trace_context FROM relay_trace_contexts(ARRAY['r-1', 'none'])",
    );
    expect(traces.rows).toEqual([{ operation_id: 'r-1', trace_context: first.rows[0]?.trace_context }]);
    const again = await asRelay.query('SELECT operation_id, send_count, claim FROM relay_claim_resends(10, 0)');
    expect(again.rows).toEqual([{ operation_id: 'r-1', send_count: 2, claim: expect.any(String) }]);
    expect((await asRelay.query("SELECT relay_count_lost(ARRAY['r-1']) AS n")).rows[0]?.n).toBe(1);
    expect(await intakeBacklog(asRelay)).toMatchObject({ open: 1, unsent: 0, givenUp: 0 });
    const gaveUp = await asRelay.query(
      "SELECT relay_record_given_up('r-1', 'job failed for good', 2, $1::uuid) AS ok",
      [again.rows[0]?.claim],
    );
    expect(gaveUp.rows[0]?.ok).toBe(true);
    expect(await sequenceOutcomeFeed(asRelay)).toBe(1);
    expect((await readOutcomes(asRelay, 0n)).map((e) => [e.position, e.kind])).toEqual([[1n, 'given_up']]);
    await asRelay.query("SELECT outcome_cursor_open('outcomes-test')");
    await asRelay.query('BEGIN');
    expect((await asRelay.query("SELECT outcome_cursor_take('outcomes-test')::text AS p")).rows[0]?.p).toBe('0');
    expect((await asRelay.query("SELECT outcome_cursor_move('outcomes-test', 1) AS moved")).rows[0]?.moved).toBe(true);
    await asRelay.query('COMMIT');
    expect((await asRelay.query("SELECT outcome_cursor_position('outcomes-test')::text AS p")).rows[0]?.p).toBe('1');
    // Forward only, and never past the feed's last position.
    expect((await asRelay.query("SELECT outcome_cursor_move('outcomes-test', 0) AS moved")).rows[0]?.moved).toBe(false);
    expect((await asRelay.query("SELECT outcome_cursor_move('outcomes-test', 5) AS moved")).rows[0]?.moved).toBe(false);
  });

  // Issue 41, item 4.4: the relay's role could call record_transfer_given_up() itself with a
  // request's hash (the hash of the job's body, which Redis holds) and a guessed send count, and
  // park a request no relay had claimed; and one claim could take 10,000 requests. Shown to fail
  // on the relay-role migration's functions ('ok', not '42501').
  it('parks only a request whose re-send its own claim took, bound to that claim; a claim takes at most 1,000', async () => {
    const ops = ['park-mine', 'park-other', 'park-first'];
    await requestTransfers(
      db.pg,
      ops.map((operationId) => ({ operationId, from: 'w1', to: 'w2', amount: '5' })),
      1_000n,
    );
    const hashOf = async (op: string) =>
      (await db.pg.query('SELECT request_hash FROM transfer_requests WHERE operation_id = $1', [op])).rows[0]
        ?.request_hash as string;
    const forged = await sqlState(
      asRelay,
      `SELECT record_transfer_given_up('park-other', '${await hashOf('park-other')}', 'forged', 0)`,
    );
    expect(forged).toBe('42501');
    expect(await sqlState(asRelay, 'SELECT * FROM relay_claim_resends(1001, 0)')).toBe('22023');
    expect(await sqlState(asRelay, 'SELECT * FROM relay_claim_first_sends(1001)')).toBe('22023');

    // Every request sent once; then this relay claims the re-send of one, another relay (the
    // owner here) of another, and the third is never re-sent.
    await asRelay.query('SELECT * FROM relay_claim_first_sends(10)');
    await db.pg.query(
      "UPDATE transfer_requests SET sent_at = sent_at - interval '1 hour' WHERE operation_id = 'park-mine'",
    );
    const mine = await asRelay.query<{ operation_id: string; send_count: number; claim: string }>(
      'SELECT operation_id, send_count, claim FROM relay_claim_resends(10, 1000)',
    );
    expect(mine.rows.map((r) => [r.operation_id, r.send_count])).toEqual([['park-mine', 2]]);
    await db.pg.query(
      "UPDATE transfer_requests SET sent_at = sent_at - interval '1 hour' WHERE operation_id = 'park-other'",
    );
    const other = await db.pg.query<{ claim: string; send_count: number }>(
      'SELECT claim, send_count FROM relay_claim_resends(10, 1000)',
    );
    expect(other.rows).toHaveLength(1);
    const claim = mine.rows[0]?.claim as string;
    const park = (op: string, sendCount: number, claimId: string) =>
      asRelay.query<{ ok: boolean }>('SELECT relay_record_given_up($1, $2, $3, $4::uuid) AS ok', [
        op,
        'job failed for good',
        sendCount,
        claimId,
      ]);
    // Not with its claim for another's request, nor for one never re-sent, nor at another send.
    expect((await park('park-other', 2, claim)).rows[0]?.ok).toBe(false);
    expect((await park('park-first', 1, claim)).rows[0]?.ok).toBe(false);
    expect((await park('park-mine', 1, claim)).rows[0]?.ok).toBe(false);
    expect((await park('park-mine', 2, other.rows[0]?.claim as string)).rows[0]?.ok).toBe(false);
    expect((await park('park-mine', 2, claim)).rows[0]?.ok).toBe(true);
    const given = await db.pg.query(
      'SELECT operation_id FROM transfer_requests WHERE given_up_at IS NOT NULL AND operation_id = ANY($1) ORDER BY 1',
      [ops],
    );
    expect(given.rows.map((r) => r.operation_id)).toEqual(['park-mine']);
  });

  // Issue 41, item 4.4: the relay's role could open cursors under any name, at position 0, and
  // a cursor at 0 on a pruned feed holds back every prune (npm run outcomes -- --prune-before
  // refuses to pass it). Shown to fail on the relay-role migration's outcome_cursor_open() ('ok').
  it(`opens cursors only under a name of ${OUTCOME_CURSOR_NAME_PATTERN}, at most ${OUTCOME_CURSORS_MAX}, and a new one at the first event kept`, async () => {
    for (const name of ['', 'junk', 'Outcomes-queue', 'outcomes-', 'outcomes-a b', `outcomes-${'x'.repeat(60)}`]) {
      expect(OUTCOME_CURSOR_NAME_PATTERN.test(name), name).toBe(false);
      expect(await sqlState(asRelay, `SELECT outcome_cursor_open('${name}')`), name).toBe('22023');
    }
    expect(OUTCOME_CURSOR_NAME_PATTERN.test(OUTCOMES_QUEUE_CURSOR)).toBe(true);
    // A feed pruned up to its third event: a cursor opened now starts where the feed does.
    await requestTransfers(
      db.pg,
      [3, 4, 5].map((i) => ({ operationId: `feed-${i}`, from: 'w1', to: 'w2', amount: '5' })),
      1_000n,
    );
    await db.pg.query(
      `SELECT record_transfer_given_up(operation_id, request_hash, 'by hand', send_count) FROM transfer_requests
        WHERE operation_id LIKE 'feed-%' ORDER BY operation_id`,
    );
    await sequenceOutcomeFeed(db.pg);
    const last = BigInt(
      (await db.pg.query('SELECT max(position)::text AS p FROM outcome_events')).rows[0]?.p as string,
    );
    await db.pg.query('DELETE FROM outcome_events WHERE position < $1', [(last - 1n).toString()]);
    expect((await asRelay.query("SELECT outcome_cursor_open('outcomes-late') AS made")).rows[0]?.made).toBe(true);
    expect((await asRelay.query("SELECT outcome_cursor_position('outcomes-late')::text AS p")).rows[0]?.p).toBe(
      (last - 2n).toString(),
    );
    // Bounded: the cursors the relay's functions may open are few, so none can be left by the thousand.
    const opened = Number(
      (await db.pg.query("SELECT count(*) AS n FROM outcome_cursors WHERE name LIKE 'outcomes-%'")).rows[0]?.n,
    );
    for (let i = opened; i < OUTCOME_CURSORS_MAX; i++)
      await asRelay.query(`SELECT outcome_cursor_open('outcomes-extra-${i}')`);
    expect(await sqlState(asRelay, "SELECT outcome_cursor_open('outcomes-one-too-many')")).toBe('54000');
    await db.pg.query("DELETE FROM outcome_cursors WHERE name LIKE 'outcomes-extra-%' OR name = 'outcomes-late'");
  });

  it('may do nothing else: every other statement is 42501', async () => {
    expect(await refusals(asRelay, FORBIDDEN)).toEqual(allRefused(FORBIDDEN));
  });

  it('control: a table privilege granted by hand is seen by the same check, and the command takes it away', async () => {
    const redrive = 'UPDATE transfer_requests SET given_up_at = NULL, send_count = send_count + 1';
    await db.pg.query(`GRANT SELECT, UPDATE ON transfer_requests TO ${relayRole}`);
    const seen = await refusals(asRelay, FORBIDDEN);
    expect(seen).not.toEqual(allRefused(FORBIDDEN));
    expect(seen[redrive]).toBe('ok');
    const again = await ensureRelayRole(db.url, relayRole, PASSWORD, db.config);
    expect(again).toMatchObject({ created: false });
    expect(again.privileges).toEqual(expectedRelayPrivileges(db.name, 'public'));
    expect(await refusals(asRelay, FORBIDDEN)).toEqual(allRefused(FORBIDDEN));
  });

  it('refuses the owner and a bad name, and a missing password in one line', async () => {
    const me = (await db.pg.query<{ me: string }>('SELECT current_user AS me')).rows[0]?.me ?? '';
    await expect(ensureRelayRole(db.url, me, PASSWORD, db.config)).rejects.toThrow(RelayRoleError);
    await expect(ensureRelayRole(db.url, 'Bad"; DROP ROLE x; --', PASSWORD, db.config)).rejects.toThrow(/role name/);
    const run = await runSource('src/cli/relay-role.ts', ['--role', relayRole], {
      DATABASE_URL: db.url,
      RELAY_DB_PASSWORD: '',
    });
    expect(run.code).toBe(1);
    expect(run.stderr.trim()).toMatch(/^configuration error: RELAY_DB_PASSWORD/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });
});
