// Asks the kernel for a free TCP port on loopback (for private service instances). The port is
// free when this answers, not when the server binds it: anything may take it in between, so a
// start must tell its own server from whatever answers there (each start here reads its
// server's own log) and start again elsewhere when it exits on "Address already in use".
import { createServer } from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('no port assigned'));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

/** A server could not bind a port it needs (its own, or a Redis Cluster bus port): another may do. */
export class PortInUseError extends Error {
  constructor(
    message: string,
    /** The port the server was started on. */
    readonly port: number,
  ) {
    super(message);
    this.name = 'PortInUseError';
  }
}

/**
 * Starts `what` on `given`, or on a port `choose()` picks and again on another each time the start
 * throws PortInUseError, `attemptsMax` ports in all. A given port is tried once (a restart, or a
 * configured URL): its refusal is the error. Any other error ends it at once.
 */
export async function startOnFreePort<T>(
  what: string,
  given: number | undefined,
  choose: () => Promise<number>,
  attemptsMax: number,
  start: (port: number, attempt: number) => Promise<T>,
): Promise<T> {
  if (given !== undefined) return start(given, 0);
  const tried: number[] = [];
  let lastError: PortInUseError | null = null;
  for (let attempt = 0; attempt < attemptsMax; attempt += 1) {
    const port = await choose();
    tried.push(port);
    try {
      return await start(port, attempt);
    } catch (err) {
      if (!(err instanceof PortInUseError)) throw err;
      lastError = err;
    }
  }
  throw new Error(
    `${what} found no port free long enough to bind it: tried ${tried.join(', ')}; the last: ${lastError?.message}`,
  );
}
