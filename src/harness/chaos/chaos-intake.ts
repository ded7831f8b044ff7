// The producer of an intake chaos run (`--intake`): the workload's valid messages requested
// through the intake (requestTransfers(), src/intake/intake.ts) in PostgreSQL transactions of the
// producer's own, one per tick, at the same steady pace as the BullMQ producer. A transfer is
// acknowledged when its transaction commits. A conflicting reuse of an id goes in a transaction
// of its own and must be refused at once (IntakeConflictError). Hostile messages never reach
// the intake: an intake run pushes them straight onto the queue during the warm-up.
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { CONFIG_DEFAULTS } from '../../config/config.ts';
import { IntakeConflictError, requestTransfers } from '../../intake/intake.ts';
import { intakeBacklog, jobIdOf } from '../../intake/relay.ts';
import type { TransferWire } from '../../ledger/transfer-request.ts';
import type { TransferQueues } from '../../queue/producer.ts';
import { notYet, done as pollDone, pollUntil } from '../services/bounded-wait.ts';
import {
  ENQUEUE_TICK_MS,
  jobRef,
  PRODUCER_RETRY_DELAY_MS,
  PRODUCER_RETRY_TIMEOUT_MS,
  type SentRecord,
} from './chaos-enqueue.ts';
import type { ChaosMessage } from './chaos-workload.ts';

const AMOUNT_MAX = BigInt(CONFIG_DEFAULTS.TRANSFER_AMOUNT_MAX);
/** How often the drain polls the intake for requests not yet decided. */
export const INTAKE_POLL_MS = 250;

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
}

export function intakeProducerFigures(): IntakeProducerFigures {
  return { transactions: 0, transactionRetries: 0, requested: 0, duplicate: 0, conflictsRefused: 0 };
}

export interface IntakeSentRecord extends SentRecord {
  readonly acknowledged: Set<string>;
  readonly intake: IntakeProducerFigures;
}

/** The job reference (chaos-enqueue.ts jobRef) the relay's job of an operation has. */
export function intakeJobRef(queues: TransferQueues, wire: TransferWire): string {
  const queue = queues.queueOf(wire.from);
  const entry = queues.shards.find((s) => s.queue === queue);
  if (entry === undefined) throw new Error(`no shard for wallet ${wire.from}`);
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
    try {
      client = await pool.connect();
      await client.query('BEGIN');
      const out = await work(client);
      await client.query('COMMIT');
      client.release();
      figures.transactions += 1;
      return out;
    } catch (err) {
      if (client !== null) {
        await client.query('ROLLBACK').catch(() => undefined);
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
  wire: TransferWire,
  triedAtMs: number,
): void {
  to.acknowledged.add(wire.operationId);
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
    effect: { from: wire.from, to: wire.to, amount: wire.amount },
  });
}

/** One message in a transaction of its own; a conflict is refused at once and recorded. */
async function requestAlone(
  pool: pg.Pool,
  queues: TransferQueues,
  m: ChaosMessage,
  to: IntakeSentRecord,
): Promise<void> {
  const { history, intake } = to;
  const wire = m.data as TransferWire;
  const triedAtMs = history.nowMs();
  try {
    const [answer] = await inTransaction(pool, intake, (client) => requestTransfers(client, [wire], AMOUNT_MAX));
    if (answer === 'requested') intake.requested += 1;
    else intake.duplicate += 1;
    acknowledge(to, queues, m, wire, triedAtMs);
  } catch (err) {
    if (!(err instanceof IntakeConflictError)) throw err;
    intake.conflictsRefused += 1;
    history.write({ type: 'request_refused', seq: m.seq, operationId: wire.operationId, reason: 'conflict' });
  }
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
  const plain = slice.filter((m) => m.kind !== 'conflict');
  if (plain.length > 0) {
    const triedAtMs = history.nowMs();
    const wires = plain.map((m) => m.data as TransferWire);
    let answers: Awaited<ReturnType<typeof requestTransfers>> | null = null;
    try {
      answers = await inTransaction(pool, intake, (client) => requestTransfers(client, wires, AMOUNT_MAX));
    } catch (err) {
      if (!(err instanceof IntakeConflictError)) throw err;
    }
    if (answers === null) {
      for (const m of plain) await requestAlone(pool, queues, m, to);
    } else {
      answers.forEach((answer, i) => {
        if (answer === 'requested') intake.requested += 1;
        else intake.duplicate += 1;
        acknowledge(to, queues, plain[i] as ChaosMessage, wires[i] as TransferWire, triedAtMs);
      });
    }
  }
  for (const m of slice.filter((x) => x.kind === 'conflict')) await requestAlone(pool, queues, m, to);
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
    const slice = messages.slice(next, Math.ceil(((tick + 1) * messages.length) / ticks));
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
