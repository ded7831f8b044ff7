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
