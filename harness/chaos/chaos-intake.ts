// The producer of an intake chaos run (`--intake`): the workload's valid messages requested
// through the intake (requestOperations(), src/intake/intake.ts) in PostgreSQL transactions of the
// producer's own, one per tick, at the same steady pace as the BullMQ producer. A transfer is
// acknowledged when its transaction commits. A conflicting reuse of an id goes in a transaction
// of its own and must be refused at once (IntakeConflictError). Hostile messages never reach
// the intake: an intake run pushes them straight onto the queue during the warm-up.
// A both-doors pair (chaos-workload.ts) is sent through both doors at once: its straight half
// added to BullMQ by the BullMQ producer (chaos-enqueue.ts) while its intake half is requested
// in a transaction of its own, each after a short seeded delay, the transaction held open a
// seeded while after the request, so that either door may decide first or wait for the other.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { CONFIG_DEFAULTS } from '../../src/config/config.ts';
import { IntakeConflictError } from '../../src/errors.ts';
import { requestOperations } from '../../src/intake/intake.ts';
import { intakeBacklog, jobIdOf } from '../../src/intake/relay.ts';
import { type OperationWire, walletOf } from '../../src/ledger/transfer-request.ts';
import type { TransferQueues } from '../../src/queue/producer.ts';
import { seededRandom } from '../../src/workload/prng.ts';
import { notYet, done as pollDone, pollUntil } from '../services/bounded-wait.ts';
import {
  ENQUEUE_TICK_MS,
  HOLD_EXPIRY_MAX_MS,
  jobRef,
  PRODUCER_RETRY_DELAY_MS,
  PRODUCER_RETRY_TIMEOUT_MS,
  type SentRecord,
  sendSlice,
} from './chaos-enqueue.ts';
import { type ChaosMessage, pairSafeEnd } from './chaos-workload.ts';

const AMOUNT_MAX = BigInt(CONFIG_DEFAULTS.TRANSFER_AMOUNT_MAX);
/** How often the drain polls the intake for requests not yet decided. */
export const INTAKE_POLL_MS = 250;
/**
 * A both-doors pair: each door waits up to BOTH_DOORS_JITTER_MS before it sends, and the request's
 * transaction stays open up to as long after the request. One pair in three gives one door a
 * head start of BOTH_DOORS_HEAD_START_MS more (by the seed, either door), so that each door also
 * decides first now and then: the straight one before the request is made (the request refused
 * at once or answered duplicate), the intake one before the straight job runs.
 */
export const BOTH_DOORS_JITTER_MS = 40;
export const BOTH_DOORS_HEAD_START_MS = 300;
const BOTH_DOORS_TIMING_SALT = 0x0d00_25ed;

/** What the intake producer did, for the report. */
export interface IntakeProducerFigures {
  /** Producer transactions committed. */
  transactions: number;
  /** Transactions run again after an error (a terminated session, a refused connection). */
  transactionRetries: number;
  /** request_transfer's answers, and the conflicts refused at once. */
  requested: number;
  duplicate: number;
  conflictsRefused: number;
  /**
   * Both-doors pairs sent; of their intake halves, those refused at once (decided straight with
   * another body) and those answered duplicate (decided straight with the same body, or sent again).
   */
  bothDoorsPairs: number;
  bothDoorsRefused: number;
  bothDoorsDuplicate: number;
}

export function intakeProducerFigures(): IntakeProducerFigures {
  return {
    transactions: 0,
    transactionRetries: 0,
    requested: 0,
    duplicate: 0,
    conflictsRefused: 0,
    bothDoorsPairs: 0,
    bothDoorsRefused: 0,
    bothDoorsDuplicate: 0,
  };
}

/** A request the intake refused at once (IntakeConflictError): its transaction rolled back. */
export interface RefusedRequest {
  readonly operationId: string;
  /** requestHash() of the refused body. */
  readonly hash: string;
  readonly seq: number;
}

export interface IntakeSentRecord extends SentRecord {
  /** Operations acknowledged to a producer: by the intake (a commit) or by BullMQ (a both-doors pair's straight add). */
  readonly acknowledged: Set<string>;
  /** Operations whose intake transaction committed, with the bodies (request hashes) committed. */
  readonly requested: Map<string, Set<string>>;
  readonly refused: RefusedRequest[];
  readonly intake: IntakeProducerFigures;
}

/** The job reference (chaos-enqueue.ts jobRef) the relay's job of an operation has. */
export function intakeJobRef(queues: TransferQueues, wire: OperationWire): string {
  const queue = queues.queueOf(walletOf(wire));
  const entry = queues.shards.find((s) => s.queue === queue);
  if (entry === undefined) throw new Error(`no shard for wallet ${walletOf(wire)}`);
  return jobRef(entry.shard, jobIdOf(wire.operationId), queues.shards.length);
}

/** One producer transaction: BEGIN, the requests, COMMIT; run again on an error other than a conflict. */
async function inTransaction<T>(
  pool: pg.Pool,
  figures: IntakeProducerFigures,
  work: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  const deadline = performance.now() + PRODUCER_RETRY_TIMEOUT_MS;
  for (;;) {
    let client: pg.PoolClient | null = null;
    // A session ended between two statements (a failover cuts every connection) makes a checked
    // out client emit 'error', which with no listener ends the process: the next statement
    // fails instead, and the transaction is tried again.
    const ignore = () => undefined;
    try {
      client = await pool.connect();
      client.on('error', ignore);
      await client.query('BEGIN');
      const out = await work(client);
      await client.query('COMMIT');
      client.off('error', ignore);
      client.release();
      figures.transactions += 1;
      return out;
    } catch (err) {
      if (client !== null) {
        await client.query('ROLLBACK').catch(() => undefined);
        client.off('error', ignore);
        client.release(true);
      }
      if (err instanceof IntakeConflictError || performance.now() > deadline) throw err;
      figures.transactionRetries += 1;
      await sleep(PRODUCER_RETRY_DELAY_MS);
    }
  }
}

function acknowledge(
  to: IntakeSentRecord,
  queues: TransferQueues,
  message: ChaosMessage,
  wire: OperationWire,
  triedAtMs: number,
): void {
  to.acknowledged.add(wire.operationId);
  const bodies = to.requested.get(wire.operationId) ?? new Set<string>();
  bodies.add(message.hash as string);
  to.requested.set(wire.operationId, bodies);
  const ref = intakeJobRef(queues, wire);
  // The job of an operation carries the body the intake stored: the first accepted message's.
  if (!to.sent.has(ref)) {
    to.sent.set(ref, message);
    to.firstTryMs?.set(ref, triedAtMs);
  }
  to.progress.enqueued += 1;
  to.history.write({
    type: 'request',
    jobId: ref,
    seq: message.seq,
    kind: message.kind,
    operationId: wire.operationId,
    effect: {
      kind: 'kind' in wire ? wire.kind : 'transfer',
      from: walletOf(wire),
      to: 'to' in wire ? wire.to : undefined,
      amount: 'amount' in wire ? wire.amount : undefined,
    },
  });
}

/**
 * One message in a transaction of its own, committed `holdMs` after the request; a conflict is
 * refused at once and recorded. Answers the intake's answer, or 'refused'.
 */
async function requestAlone(
  pool: pg.Pool,
  queues: TransferQueues,
  m: ChaosMessage,
  to: IntakeSentRecord,
  holdMs = 0,
): Promise<'requested' | 'duplicate' | 'refused'> {
  const { history, intake } = to;
  const wire = m.data as OperationWire;
  const triedAtMs = history.nowMs();
  try {
    const [answer] = await inTransaction(pool, intake, async (client) => {
      const answers = await requestOperations(client, [wire], AMOUNT_MAX, HOLD_EXPIRY_MAX_MS);
      if (holdMs > 0) await sleep(holdMs);
      return answers;
    });
    if (answer === 'requested') intake.requested += 1;
    else intake.duplicate += 1;
    acknowledge(to, queues, m, wire, triedAtMs);
    return answer === 'requested' ? 'requested' : 'duplicate';
  } catch (err) {
    if (!(err instanceof IntakeConflictError)) throw err;
    if (m.kind !== 'both-doors') intake.conflictsRefused += 1;
    to.refused.push({ operationId: wire.operationId, hash: m.hash as string, seq: m.seq });
    history.write({ type: 'request_refused', seq: m.seq, operationId: wire.operationId, reason: 'conflict' });
    return 'refused';
  }
}

/**
 * A both-doors pair, both halves at once: the straight one added to BullMQ (chaos-enqueue.ts,
 * acknowledged when BullMQ answers), the intake one requested alone; the delays and the hold are
 * seeded by the message's position.
 */
async function sendBothDoors(
  pool: pg.Pool,
  queues: TransferQueues,
  intakeHalf: ChaosMessage,
  straightHalf: ChaosMessage,
  to: IntakeSentRecord,
): Promise<void> {
  if (
    intakeHalf.door !== 'intake' ||
    straightHalf.door !== 'straight' ||
    intakeHalf.operationId !== straightHalf.operationId
  ) {
    throw new Error(`message ${intakeHalf.seq} does not start a both-doors pair`);
  }
  const random = seededRandom((intakeHalf.seq ^ BOTH_DOORS_TIMING_SALT) >>> 0);
  const headStart = random() < 1 / 3 ? BOTH_DOORS_HEAD_START_MS : 0;
  const straightFirst = random() < 0.5;
  const straightDelayMs = Math.floor(random() * BOTH_DOORS_JITTER_MS) + (straightFirst ? 0 : headStart);
  const intakeDelayMs = Math.floor(random() * BOTH_DOORS_JITTER_MS) + (straightFirst ? headStart : 0);
  const holdMs = Math.floor(random() * BOTH_DOORS_JITTER_MS);
  to.intake.bothDoorsPairs += 1;
  const [, answer] = await Promise.all([
    sleep(straightDelayMs).then(() => sendSlice(queues, [straightHalf], to)),
    sleep(intakeDelayMs).then(() => requestAlone(pool, queues, intakeHalf, to, holdMs)),
  ]);
  if (answer === 'refused') to.intake.bothDoorsRefused += 1;
  if (answer === 'duplicate') to.intake.bothDoorsDuplicate += 1;
}

/**
 * The valid messages of one tick in one transaction, but the conflicting reuses of an id, each
 * in one of its own. Should the tick's transaction meet a conflict after all (the reuse came
 * first and the original is now the one refused), it is rolled back whole and its messages go
 * one by one.
 */
async function requestSlice(
  pool: pg.Pool,
  queues: TransferQueues,
  slice: readonly ChaosMessage[],
  to: IntakeSentRecord,
): Promise<void> {
  const { history, intake } = to;
  for (const m of slice) if (m.kind === 'invalid') throw new Error('hostile messages never go through the intake');
  const plain = slice.filter((m) => m.kind !== 'conflict' && m.kind !== 'both-doors');
  slice.forEach((m, i) => {
    if (m.door === 'straight' && slice[i - 1]?.door !== 'intake')
      throw new Error(`both-doors pair of message ${m.seq} split`);
  });
  const pairs = slice.flatMap((m, i) => (m.door === 'intake' ? [[m, slice[i + 1]] as const] : []));
  const bothDoors = Promise.all(
    pairs.map(([intakeHalf, straightHalf]) => {
      if (straightHalf === undefined) throw new Error(`both-doors pair of message ${intakeHalf.seq} split`);
      return sendBothDoors(pool, queues, intakeHalf, straightHalf, to);
    }),
  );
  // Awaited below; a failure meanwhile must not count as unhandled.
  bothDoors.catch(() => undefined);
  if (plain.length > 0) {
    const triedAtMs = history.nowMs();
    const wires = plain.map((m) => m.data as OperationWire);
    let answers: Awaited<ReturnType<typeof requestOperations>> | null = null;
    try {
      answers = await inTransaction(pool, intake, (client) =>
        requestOperations(client, wires, AMOUNT_MAX, HOLD_EXPIRY_MAX_MS),
      );
    } catch (err) {
      if (!(err instanceof IntakeConflictError)) throw err;
    }
    if (answers === null) {
      for (const m of plain) await requestAlone(pool, queues, m, to);
    } else {
      answers.forEach((answer, i) => {
        if (answer === 'requested') intake.requested += 1;
        else intake.duplicate += 1;
        acknowledge(to, queues, plain[i] as ChaosMessage, wires[i] as OperationWire, triedAtMs);
      });
    }
  }
  for (const m of slice.filter((x) => x.kind === 'conflict')) await requestAlone(pool, queues, m, to);
  await bothDoors;
}

/** Requests the messages in order, a slice every tick, so they spread over `windowMs`. */
export async function requestPaced(
  pool: pg.Pool,
  queues: TransferQueues,
  messages: readonly ChaosMessage[],
  windowMs: number,
  to: IntakeSentRecord,
  signal: AbortSignal,
): Promise<void> {
  const ticks = Math.max(1, Math.floor(windowMs / ENQUEUE_TICK_MS));
  for (let tick = 0, next = 0; next < messages.length; tick++) {
    const dueMs = tick * ENQUEUE_TICK_MS - to.history.nowMs();
    if (dueMs > 0) await sleep(dueMs);
    if (signal.aborted) return;
    const slice = messages.slice(next, pairSafeEnd(messages, Math.ceil(((tick + 1) * messages.length) / ticks)));
    next += slice.length;
    await requestSlice(pool, queues, slice, to);
  }
}

/**
 * Waits until every request in the intake is decided; throws after timeoutMs with what is open
 * (each reading bounded by the time left: a pool that cannot reach PostgreSQL is not a hang).
 */
export async function waitForIntakeDecided(pool: pg.Pool, timeoutMs: number, signal: AbortSignal): Promise<void> {
  await pollUntil(
    async () => {
      let backlog: Awaited<ReturnType<typeof intakeBacklog>>;
      try {
        backlog = await intakeBacklog(pool);
      } catch (err) {
        return notYet(`the backlog could not be read: ${err instanceof Error ? err.message : String(err)}`);
      }
      return backlog.open === 0 ? pollDone(undefined) : notYet(JSON.stringify(backlog));
    },
    {
      what: 'every intake request decided',
      timeoutMs,
      intervalMs: INTAKE_POLL_MS,
      signal,
      timedOut: (seen) => `the intake still held undecided requests after ${timeoutMs} ms: ${seen}`,
    },
  );
}
