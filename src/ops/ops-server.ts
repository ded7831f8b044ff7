// The HTTP server of one long-running process, a worker or a relay (node:http, no framework):
// /healthz answers while the process is alive, /readyz only while it does its work, /metrics
// renders the registry in Prometheus text format.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { StartupError } from '../errors.ts';
import type { Logger } from '../log/logger.ts';

/**
 * The message a worker sends, when a parent started it with an IPC channel, once its HTTP server
 * listens: how a launcher that asked for METRICS_PORT=0 learns the port, with no window in which
 * another process could take a port picked in advance.
 */
export interface MetricsListeningMessage {
  readonly type: 'metrics-listening';
  readonly port: number;
}

/** Tells the parent process the port bound, when there is a parent listening (an IPC channel). */
export function reportListeningPort(port: number): void {
  const message: MetricsListeningMessage = { type: 'metrics-listening', port };
  process.send?.(message);
}

/** The port a worker's message reports, or null for any other message. */
export function listeningPortOf(message: unknown): number | null {
  if (typeof message !== 'object' || message === null) return null;
  const m = message as Partial<Record<keyof MetricsListeningMessage, unknown>>;
  return m.type === 'metrics-listening' && typeof m.port === 'number' && Number.isInteger(m.port) && m.port > 0
    ? m.port
    : null;
}

export type Readiness = { readonly ready: true } | { readonly ready: false; readonly reason: string };

/** What /metrics renders: a worker's or a relay's registry. */
export interface MetricsExposition {
  exposition(): Promise<string>;
  readonly contentType: string;
}

export interface OpsServerOptions {
  readonly host: string;
  readonly port: number;
  readonly metrics: MetricsExposition;
  /** The variable that sets the port, named in a start-up error (default METRICS_PORT). */
  readonly portVariable?: 'METRICS_PORT' | 'RELAY_METRICS_PORT';
  readonly readiness: () => Readiness;
  readonly logger: Logger;
}

function send(res: ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': contentType, 'cache-control': 'no-store' });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}

export class OpsServer {
  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens, or throws a StartupError naming METRICS_PORT / METRICS_HOST. */
  static async start(options: OpsServerOptions): Promise<OpsServer> {
    const server = createServer((req, res) => void OpsServer.handle(options, req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        const where = `${options.host}:${options.port}`;
        const portVariable = options.portVariable ?? 'METRICS_PORT';
        if (err.code === 'EADDRINUSE') {
          reject(
            new StartupError(
              [portVariable],
              `port ${options.port} is already in use (${where}); give each ${portVariable === 'METRICS_PORT' ? 'worker' : 'relay'} process its own ${portVariable}, or set ${portVariable}=off`,
            ),
          );
        } else if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') {
          reject(new StartupError(['METRICS_HOST'], `cannot listen on ${where}: ${err.code}`));
        } else {
          reject(new StartupError([portVariable], `cannot listen on ${where}: ${err.message}`));
        }
      });
      server.listen(options.port, options.host, () => resolve());
    });
    server.on('error', (err) => options.logger.error({ err }, 'metrics server error'));
    // The port bound: options.port, or the kernel's pick for port 0.
    const address = server.address();
    return new OpsServer(server, address !== null && typeof address === 'object' ? address.port : options.port);
  }

  private static async handle(options: OpsServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, 'method not allowed\n');
      return;
    }
    if (path === '/healthz') {
      send(res, 200, 'ok\n');
    } else if (path === '/readyz') {
      const r = options.readiness();
      if (r.ready) send(res, 200, 'ready\n');
      else send(res, 503, `not ready: ${r.reason}\n`);
    } else if (path === '/metrics') {
      try {
        send(res, 200, await options.metrics.exposition(), options.metrics.contentType);
      } catch (err) {
        options.logger.error({ err }, 'metrics could not be rendered');
        send(res, 500, 'metrics could not be rendered\n');
      }
    } else {
      send(res, 404, 'not found: try /healthz, /readyz or /metrics\n');
    }
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }
}
