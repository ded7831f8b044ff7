// db-ceiling: the worker's own decision, apply_transfer() with the worker's arguments, called
// straight from a `pg` pool (the worker's pool settings, workers × concurrency connections),
// one transfer per commit, no queue, no lock: what the database decision alone can do here.
// db-ceiling-first: the same with the first migration's function (first-decision.ts), the
// pinned anchor that today's single path is compared with in the same run.
import type pg from 'pg';
import { endPool } from '../../db/pool-close.ts';
import { createPool } from '../../db/prisma.ts';
import type { CaseContext, CaseRunResult } from './case-result.ts';
import { decide } from './decision-call.ts';
import { decideFirst, firstDecisionSql } from './first-decision.ts';
import { type LaneDriver, runLanesCase } from './lanes-case.ts';

export function runDbCeiling(ctx: CaseContext): Promise<CaseRunResult> {
  return runCeiling(ctx, 'today');
}

export function runDbCeilingFirst(ctx: CaseContext): Promise<CaseRunResult> {
  return runCeiling(ctx, 'first');
}

function runCeiling(ctx: CaseContext, decision: 'today' | 'first'): Promise<CaseRunResult> {
  return runLanesCase(ctx, (databaseUrl, lanes): LaneDriver => {
    let pool: pg.Pool | null = null;
    let unexpected = 0;
    const requirePool = () => {
      if (pool === null) throw new Error('db-ceiling pool is not open');
      return pool;
    };
    return {
      async open() {
        pool = createPool({ ...ctx.config, databaseUrl, dbPoolMax: lanes });
        if (decision === 'first') await requirePool().query(firstDecisionSql());
        // Every connection open before the first transfer, so the span holds no connection set-up.
        const clients = await Promise.all(Array.from({ length: lanes }, () => requirePool().connect()));
        for (const c of clients) c.release();
      },
      async apply(request) {
        const outcome =
          decision === 'first' ? await decideFirst(requirePool(), request) : await decide(requirePool(), request);
        if (outcome !== 'applied') unexpected += 1;
      },
      async close() {
        if (pool !== null) await endPool(pool);
      },
      notes: () => ({ unexpectedOutcomes: unexpected }),
    };
  });
}
