// Malformed and hostile messages pushed straight onto the queue (as a foreign producer could):
// each fails at once with its reason, without retries, and nothing moves.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { reconcile } from '../../src/ledger/reconciliation.ts';
import { createPipeline, type Pipeline } from '../support/pipeline.ts';

const good = { operationId: 'op-ok', from: 'w1', to: 'w2', amount: '5' };
const CORPUS: [string, unknown][] = [
  ['null', null],
  ['number', 42],
  ['string', 'transfer please'],
  ['boolean', true],
  ['array', [good]],
  ['empty object', {}],
  ['nested object as amount', { ...good, amount: { value: '5' } }],
  ['nested object as id', { ...good, operationId: { $ne: null } }],
  ['array as from', { ...good, from: ['w1'] }],
  ['null amount', { ...good, amount: null }],
  ['null operationId', { ...good, operationId: null }],
  ['missing amount', { operationId: 'x', from: 'w1', to: 'w2' }],
  ['missing to', { operationId: 'x', from: 'w1', amount: '5' }],
  ['number amount', { ...good, amount: 5 }],
  ['float amount', { ...good, amount: '5.5' }],
  ['float number amount', { ...good, amount: 5.5 }],
  ['exponent', { ...good, amount: '5e2' }],
  ['hex', { ...good, amount: '0x10' }],
  ['negative', { ...good, amount: '-5' }],
  ['plus sign', { ...good, amount: '+5' }],
  ['zero', { ...good, amount: '0' }],
  ['spaces', { ...good, amount: ' 5 ' }],
  ['overflow int64', { ...good, amount: '9223372036854775808' }],
  ['over maximum', { ...good, amount: '1000000000000001' }],
  ['very long digits', { ...good, amount: '1'.repeat(5000) }],
  ['NaN text', { ...good, amount: 'NaN' }],
  ['Infinity text', { ...good, amount: 'Infinity' }],
  ['empty amount', { ...good, amount: '' }],
  ['5000-character id', { ...good, operationId: 'a'.repeat(5000) }],
  ['129-character wallet', { ...good, from: 'w'.repeat(129) }],
  ['SQL injection id', { ...good, operationId: "x'); DELETE FROM wallets; --" }],
  ['SQL injection wallet', { ...good, to: "w2' OR '1'='1" }],
  ['Redis hash tag in wallet', { ...good, from: 'w1}{other' }],
  ['newline in id', { ...good, operationId: 'op\nDEL *' }],
  ['unicode id', { ...good, operationId: 'opé' }],
  ['NUL byte', { ...good, operationId: 'op\u0000' }],
  ['whitespace id', { ...good, operationId: '   ' }],
  ['same wallet', { ...good, to: 'w1' }],
  ['lowercase currency', { ...good, currency: 'eur' }],
  ['long currency', { ...good, currency: 'EURO' }],
  ['number currency', { ...good, currency: 978 }],
  ['extra field', { ...good, balance: '1000000' }],
  ['prototype pollution', JSON.parse('{"operationId":"p","from":"w1","to":"w2","amount":"5","__proto__":{"x":1}}')],
  ['empty from', { ...good, from: '' }],
];

let p: Pipeline;
beforeAll(async () => {
  p = await createPipeline();
  await p.seed(2, 1_000n);
  await p.startWorker();
});
afterAll(async () => p.close());

it(`rejects each of ${CORPUS.length} hostile messages with a reason; nothing moves; tables intact`, async () => {
  expect(CORPUS.length).toBeGreaterThanOrEqual(40);
  const before = await p.balances();
  const jobs = await Promise.all(CORPUS.map(([, data]) => p.addRaw(data)));
  const wrongName = await p.addRaw(good, 'drop-tables');
  const settled = await Promise.all([...jobs, wrongName].map((j) => p.settle(j)));
  settled.forEach((s, i) => {
    const label = CORPUS[i]?.[0] ?? 'wrong job name';
    expect(s.ok, label).toBe(false);
    if (!s.ok) expect(s.reason, label).toMatch(/^invalid_request: \S/);
  });
  for (const job of [...jobs, wrongName]) {
    const fresh = await p.queue.getJob(job.id ?? '');
    expect(fresh?.attemptsMade, `job ${job.id} retried`).toBe(1);
    expect(await fresh?.getState()).toBe('failed');
  }
  expect(await p.balances()).toEqual(before);
  const counts = await p.db.pg.query<{ t: string; e: string; w: string }>(
    'SELECT (SELECT count(*) FROM transfers) AS t, (SELECT count(*) FROM ledger_entries) AS e, (SELECT count(*) FROM wallets) AS w',
  );
  expect(counts.rows[0]).toEqual({ t: '0', e: '4', w: '2' });
  expect((await reconcile(p.db.prisma)).ok).toBe(true);

  // The worker is still healthy afterwards.
  expect(await p.result(await p.addRaw(good))).toMatchObject({ outcome: 'applied' });
});
