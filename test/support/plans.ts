// The plans of what a statement runs, nested statements included (a function's own queries), as
// auto_explain prints them: for the tests that hold a query to its indexes on a large table.
import type pg from 'pg';

/** One plan node, as auto_explain's JSON writes it. */
export type PlanNode = Record<string, unknown>;

/**
 * The JSON plans of every statement `sql` runs that names `relation`, nested ones included, with
 * ANALYZE and BUFFERS, in a session of its own (`setup` runs first in it: a setting to try).
 */
export async function plansOf(
  pool: pg.Pool,
  sql: string,
  values: unknown[],
  relation: string,
  setup?: string,
): Promise<string[]> {
  const client: pg.PoolClient = await pool.connect();
  const notices: string[] = [];
  const listen = (n: { message?: string }) => notices.push(n.message ?? '');
  client.on('notice', listen);
  try {
    if (setup !== undefined) await client.query(setup);
    await client.query(`LOAD 'auto_explain'`);
    await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on;
      SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_format = json;
      SET auto_explain.log_level = notice; SET client_min_messages = notice`);
    await client.query(sql, values);
    await client.query('RESET auto_explain.log_min_duration');
  } finally {
    client.off('notice', listen);
    client.release(true);
  }
  return notices.filter((n) => n.includes(relation));
}

/** Every node of a plan's JSON text, flattened, the root first. */
export function nodesOf(notice: string): PlanNode[] {
  const plan = JSON.parse(notice.slice(notice.indexOf('{'))) as { Plan: PlanNode };
  const out: PlanNode[] = [];
  const walk = (node: PlanNode) => {
    out.push(node);
    for (const child of (node.Plans as PlanNode[] | undefined) ?? []) walk(child);
  };
  walk(plan.Plan);
  return out;
}

/** The buffers a plan's root read or found in shared memory (its children's included). */
export function buffersOf(nodes: readonly PlanNode[]): number {
  const root = nodes[0] ?? {};
  return Number(root['Shared Hit Blocks'] ?? 0) + Number(root['Shared Read Blocks'] ?? 0);
}
