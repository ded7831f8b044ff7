// The queue dashboard: Bull Board over a list of BullMQ queues, as a Hono app. Read-only unless
// told otherwise: then Bull Board's API refuses every action that changes a queue or a job
// (retry, clean, promote, pause, empty, obliterate, add, edit) with 405 and its UI hides them.
// It takes queue names rather than one name so that sharded queues can be shown side by side.
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { HonoAdapter } from '@bull-board/hono';
import { serveStatic } from '@hono/node-server/serve-static';
import { Queue } from 'bullmq';
import { Hono } from 'hono';
import type { Cluster, Redis } from 'ioredis';

/** Queues one dashboard shows at most. */
export const DASHBOARD_QUEUES_MAX = 64;
/** The same names QUEUE_NAME accepts. */
const QUEUE_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;
export const DASHBOARD_TITLE = 'fenced transfers';

export interface BoardOptions {
  queueNames: readonly string[];
  /** BullMQ prefix of each queue; default BullMQ's `bull` (cluster mode gives each shard its own). */
  queuePrefixes?: Readonly<Record<string, string>>;
  /** Shared by every queue of the board; the caller owns it and closes it. */
  connection: Redis | Cluster;
  readOnly: boolean;
  /** Errors the queues report (a lost Redis connection); without it BullMQ prints them. */
  onError?: (err: Error, queueName: string) => void;
}

export interface Board {
  app: Hono;
  queues: readonly Queue[];
  /** Closes the queues (not the shared connection). */
  close(): Promise<void>;
}

export function validateQueueNames(queueNames: readonly string[]): void {
  if (queueNames.length === 0) throw new RangeError('the dashboard needs at least one queue name');
  if (queueNames.length > DASHBOARD_QUEUES_MAX) {
    throw new RangeError(`the dashboard shows at most ${DASHBOARD_QUEUES_MAX} queues, got ${queueNames.length}`);
  }
  for (const name of queueNames) {
    if (!QUEUE_NAME_PATTERN.test(name))
      throw new RangeError(`queue name ${JSON.stringify(name)} is not 1-64 characters of [A-Za-z0-9._-]`);
  }
  if (new Set(queueNames).size !== queueNames.length) throw new RangeError('the same queue name is given twice');
}

export function createBoard(options: BoardOptions): Board {
  validateQueueNames(options.queueNames);
  // skipMetasUpdate: the dashboard never writes the queue's meta hash; producers and workers own it.
  const queues = options.queueNames.map((name) => {
    const prefix = options.queuePrefixes?.[name];
    const queue = new Queue(name, {
      connection: options.connection,
      skipMetasUpdate: true,
      ...(prefix === undefined ? {} : { prefix }),
    });
    queue.on('error', (err) => options.onError?.(err, name));
    return queue;
  });
  const serverAdapter = new HonoAdapter(serveStatic);
  serverAdapter.setBasePath('/');
  createBullBoard({
    queues: queues.map((queue) => new BullMQAdapter(queue, { readOnlyMode: options.readOnly })),
    serverAdapter,
    options: { uiConfig: { boardTitle: DASHBOARD_TITLE } },
  });
  const app = new Hono();
  app.route('/', serverAdapter.registerPlugin());
  return {
    app,
    queues,
    async close() {
      await Promise.all(queues.map((queue) => queue.close()));
    },
  };
}
