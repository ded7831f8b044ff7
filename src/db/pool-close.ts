// Closing a pg pool completely. pg-pool's end() resolves as soon as it has told each client to
// end, while their sockets may still be open and their server sessions alive. A database dropped
// WITH (FORCE) at that moment terminates those sessions, and the server's 57P01 "terminating
// connection due to administrator command" reaches a client that is closing. So a pool whose
// database is about to be dropped is ended with endPool(), which also waits for the sockets.
import type pg from 'pg';

/** How long endPool() waits for the server to close the sockets before it gives up waiting. */
export const POOL_CLOSE_TIMEOUT_MS = 10_000;

interface OpenConnections {
  clients: Set<pg.PoolClient>;
  /** Called each time a connection closes. */
  onClose: Set<() => void>;
}

const tracked = new WeakMap<pg.Pool, OpenConnections>();

/** Starts counting the pool's open connections; call it before the pool is first used. */
export function trackConnections(pool: pg.Pool): pg.Pool {
  if (tracked.has(pool)) return pool;
  const open: OpenConnections = { clients: new Set(), onClose: new Set() };
  tracked.set(pool, open);
  pool.on('connect', (client) => {
    open.clients.add(client);
    // 'end' comes once the socket has closed, whoever closed it.
    client.once('end', () => {
      open.clients.delete(client);
      for (const notify of open.onClose) notify();
    });
  });
  return pool;
}

/** Connections of a tracked pool whose socket is still open. */
export function openConnectionCount(pool: pg.Pool): number {
  return tracked.get(pool)?.clients.size ?? 0;
}

/**
 * Resolves once every connection of a tracked pool has closed, or after timeoutMs (then the
 * pool's 'error' listener still receives whatever the server says to the stragglers).
 * Returns the number of connections still open.
 */
export function connectionsClosed(pool: pg.Pool, timeoutMs: number = POOL_CLOSE_TIMEOUT_MS): Promise<number> {
  const open = tracked.get(pool);
  if (open === undefined) throw new Error('connectionsClosed() needs a pool passed to trackConnections() first');
  if (open.clients.size === 0) return Promise.resolve(0);
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      open.onClose.delete(check);
      resolve(open.clients.size);
    };
    const check = (): void => {
      if (open.clients.size === 0) done();
    };
    const timer = setTimeout(done, timeoutMs);
    open.onClose.add(check);
  });
}

/** pool.end(), then wait until the server has closed every connection of the (tracked) pool. */
export async function endPool(pool: pg.Pool, timeoutMs: number = POOL_CLOSE_TIMEOUT_MS): Promise<number> {
  await pool.end();
  return connectionsClosed(pool, timeoutMs);
}
