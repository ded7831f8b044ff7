// The outcome feed's readers of an intake chaos run: FEED_READERS sessions that read the feed
// while the run goes on, as a consumer would, and keep every (position → event) they were shown,
// for the checker's rule that a position, once read, is never another event's
// (observedPositionsCheck() in intake-checks.ts).
//
// Each logs in as a read role of its own making (`npm run db:read-role`'s grants: EXECUTE on
// outcome_events_after() and nothing else, so it cannot sequence the feed even by mistake), and
// each read is a transaction: BEGIN (READ COMMITTED, or REPEATABLE READ, by the seed), one to
// FEED_READER_PAGES_MAX pages of readOutcomes(), then COMMIT or ROLLBACK, by the seed. A read
// starts after the last position the reader saw, or now and then (by the seed) from an earlier
// one, so positions are read again. A failed read (a session ended, a refused connection) is
// counted and the reader connects again.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { loadConfig } from '../../src/config/config.ts';
import { ensureIntakeRole, INTAKE_ROLES } from '../../src/db/intake-role-grants.ts';
import { dropWorkerRole, roleUrl } from '../../src/db/worker-role-grants.ts';
import { type OutcomeEvent, readOutcomes } from '../../src/intake/outcome-feed.ts';
import { type Random, seededRandom } from '../../src/workload/prng.ts';

export const FEED_READERS = 2;
/** Pause between two reads of one reader, at most (seeded, from 0). */
export const FEED_READER_PAUSE_MS = 150;
/** Events per page, and pages per read at most. */
export const FEED_READER_PAGE = 500;
export const FEED_READER_PAGES_MAX = 4;
/** Share of reads that end in ROLLBACK, in REPEATABLE READ, and that start before the last position seen. */
const ROLLBACK_SHARE = 0.5;
const REPEATABLE_READ_SHARE = 0.3;
const REREAD_SHARE = 0.2;
const READER_SEED_SALT = 0x0fee_d5ee;
const PASSWORD_BYTES = 24;

/** One event a reader was shown at one position, the first time it was shown it. */
export interface FeedObservation {
  readonly position: bigint;
  readonly event: OutcomeEvent;
  readonly reader: number;
  /** How the read's transaction was to end (COMMIT or ROLLBACK), and when it was shown (ms since the readers started). */
  readonly ended: 'commit' | 'rollback';
  readonly atMs: number;
}

export interface FeedReaderFigures {
  readonly readers: number;
  readonly reads: number;
  readonly commits: number;
  readonly rollbacks: number;
  readonly repeatableReads: number;
  /** Reads that started before the last position the reader had seen. */
  readonly rereads: number;
  readonly failedReads: number;
  /** Events shown in all, distinct positions among them, and the highest. */
  readonly eventsShown: number;
  readonly positionsObserved: number;
  readonly lastPositionObserved: number;
}

/** The fields that make an event that event: a position must show the same ones every time. */
export function eventFingerprint(e: OutcomeEvent): string {
  return JSON.stringify([
    e.operationId,
    e.kind,
    e.reason,
    e.from,
    e.to,
    e.amountMinor?.toString() ?? null,
    e.currency,
    e.decidedAt.getTime(),
    e.operation,
    e.originalId,
    JSON.stringify(e.detail),
  ]);
}

export class FeedReaders {
  /** position → fingerprint → the first observation of it. */
  private readonly seen = new Map<bigint, Map<string, FeedObservation>>();
  private readonly stopping = new AbortController();
  private readonly loops: Promise<void>[] = [];
  private readonly clients = new Set<pg.Client>();
  private readonly t0 = performance.now();
  private stopped: Promise<void> | null = null;
  private counts = { reads: 0, commits: 0, rollbacks: 0, repeatableReads: 0, rereads: 0, failedReads: 0, shown: 0 };

  private constructor(
    private readonly ownerUrl: string,
    private readonly role: string,
    private readonly url: string,
  ) {}

  /** Makes the read role and starts `count` readers; their choices follow `seed`. */
  static async start(ownerUrl: string, seed: number, count = FEED_READERS): Promise<FeedReaders> {
    const role = `chaos_reader_${randomBytes(4).toString('hex')}`;
    const password = randomBytes(PASSWORD_BYTES).toString('hex');
    await ensureIntakeRole(INTAKE_ROLES.read, ownerUrl, role, password, loadConfig({ DATABASE_POOLER: 'none' }));
    const readers = new FeedReaders(ownerUrl, role, roleUrl(ownerUrl, role, password));
    for (let i = 1; i <= count; i++) {
      readers.loops.push(readers.run(i, seededRandom((seed ^ (READER_SEED_SALT + i)) >>> 0)));
    }
    return readers;
  }

  /** Every distinct (position, event) the readers were shown, in position order. */
  observations(): FeedObservation[] {
    return [...this.seen.values()]
      .flatMap((byEvent) => [...byEvent.values()])
      .sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : a.atMs - b.atMs));
  }

  figures(): FeedReaderFigures {
    const c = this.counts;
    let last = 0n;
    for (const p of this.seen.keys()) if (p > last) last = p;
    return {
      readers: this.loops.length,
      reads: c.reads,
      commits: c.commits,
      rollbacks: c.rollbacks,
      repeatableReads: c.repeatableReads,
      rereads: c.rereads,
      failedReads: c.failedReads,
      eventsShown: c.shown,
      positionsObserved: this.seen.size,
      lastPositionObserved: Number(last),
    };
  }

  /** Stops the readers (the read in hand is abandoned: its session ends) and drops the role; once. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      this.stopping.abort();
      for (const c of this.clients) await c.end().catch(() => undefined);
      await Promise.all(this.loops);
      await dropWorkerRole(this.ownerUrl, this.role).catch(() => undefined);
    })();
    return this.stopped;
  }

  private observe(reader: number, events: readonly OutcomeEvent[], ended: 'commit' | 'rollback'): void {
    const atMs = Math.round(performance.now() - this.t0);
    for (const event of events) {
      const fingerprint = eventFingerprint(event);
      let byEvent = this.seen.get(event.position);
      if (byEvent === undefined) {
        byEvent = new Map();
        this.seen.set(event.position, byEvent);
      }
      if (!byEvent.has(fingerprint)) byEvent.set(fingerprint, { position: event.position, event, reader, ended, atMs });
    }
    this.counts.shown += events.length;
  }

  private async run(reader: number, random: Random): Promise<void> {
    const signal = this.stopping.signal;
    let client: pg.Client | null = null;
    let last = 0n;
    while (!signal.aborted) {
      try {
        if (client === null) {
          const fresh = new pg.Client({ connectionString: this.url, application_name: 'chaos-feed-reader' });
          fresh.on('error', () => undefined);
          this.clients.add(fresh);
          client = fresh;
          await fresh.connect();
        }
        const repeatable = random() < REPEATABLE_READ_SHARE;
        const rollback = random() < ROLLBACK_SHARE;
        const reread = last > 0n && random() < REREAD_SHARE;
        let after = reread ? BigInt(Math.floor(random() * Number(last))) : last;
        await client.query(repeatable ? 'BEGIN ISOLATION LEVEL REPEATABLE READ' : 'BEGIN');
        const shown: OutcomeEvent[] = [];
        for (let page = 0; page < FEED_READER_PAGES_MAX; page++) {
          const events = await readOutcomes(client, after, FEED_READER_PAGE);
          // Kept as soon as shown: a consumer may act on what it was shown whatever becomes of
          // its transaction.
          this.observe(reader, events, rollback ? 'rollback' : 'commit');
          shown.push(...events);
          if (events.length < FEED_READER_PAGE) break;
          after = (events.at(-1) as OutcomeEvent).position;
        }
        await client.query(rollback ? 'ROLLBACK' : 'COMMIT');
        const c = this.counts;
        c.reads += 1;
        if (rollback) c.rollbacks += 1;
        else c.commits += 1;
        if (repeatable) c.repeatableReads += 1;
        if (reread) c.rereads += 1;
        for (const e of shown) if (e.position > last) last = e.position;
      } catch {
        if (signal.aborted) break;
        this.counts.failedReads += 1;
        if (client !== null) {
          this.clients.delete(client);
          await client.end().catch(() => undefined);
          client = null;
        }
      }
      await sleep(Math.floor(random() * FEED_READER_PAUSE_MS), undefined, { signal }).catch(() => undefined);
    }
    if (client !== null) {
      this.clients.delete(client);
      await client.end().catch(() => undefined);
    }
  }
}
