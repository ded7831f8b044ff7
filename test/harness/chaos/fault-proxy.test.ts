// The fault proxy against a local echo server: a plain pipe, added delay, a stall that holds
// bytes and then delivers them in order, and a cut that resets and refuses connections;
// replies held alone, then lost in a cut, while the requests ran.
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy } from '../../../harness/chaos/fault-proxy.ts';

let echo: Server;
let proxy: FaultProxy;
/** Everything the echo server has received, in order: what reached the target. */
let received = '';

function connectTo(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Sends `text` and resolves with the echo and how long it took. */
function roundTrip(socket: Socket, text: string): Promise<{ reply: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    let reply = '';
    const onData = (chunk: Buffer) => {
      reply += chunk.toString('utf8');
      if (reply.length >= text.length) {
        socket.off('data', onData);
        resolve({ reply, ms: performance.now() - started });
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(text);
  });
}

/** Polls `condition` every 10 ms; throws after timeoutMs. */
async function waitFor(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadlineMs = performance.now() + timeoutMs;
  while (!condition()) {
    if (performance.now() > deadlineMs) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function answeredWithin(pending: Promise<unknown>, ms: number): Promise<boolean> {
  return Promise.race([pending.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
}

beforeAll(async () => {
  echo = createServer((s) => {
    s.on('error', () => undefined);
    s.on('data', (chunk: Buffer) => {
      received += chunk.toString('utf8');
    });
    s.pipe(s);
  });
  const port = await new Promise<number>((resolve) =>
    echo.listen(0, '127.0.0.1', () => {
      const a = echo.address();
      resolve(typeof a === 'object' && a !== null ? a.port : 0);
    }),
  );
  proxy = await FaultProxy.start('test', '127.0.0.1', port);
});

afterAll(async () => {
  await proxy.close();
  await new Promise<void>((resolve) => echo.close(() => resolve()));
});

describe('FaultProxy', () => {
  it('forwards bytes both ways', async () => {
    const s = await connectTo(proxy.port);
    expect((await roundTrip(s, 'hello')).reply).toBe('hello');
    s.destroy();
  });

  it('adds the configured delay in each direction', async () => {
    const s = await connectTo(proxy.port);
    proxy.setDelay(100, 0);
    const { reply, ms } = await roundTrip(s, 'slow');
    proxy.setDelay(0, 0);
    expect(reply).toBe('slow');
    expect(ms).toBeGreaterThanOrEqual(190);
    s.destroy();
  });

  it('holds bytes while stalled and delivers them in order afterwards', async () => {
    const s = await connectTo(proxy.port);
    proxy.stall();
    const pending = roundTrip(s, 'abcdef');
    const early = await Promise.race([
      pending.then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('held'), 300)),
    ]);
    expect(early).toBe('held');
    proxy.unstall();
    expect((await pending).reply).toBe('abcdef');
    s.destroy();
  }, 10_000);

  it('forwards requests but holds the replies, which a cut then discards', async () => {
    const s = await connectTo(proxy.port);
    proxy.stallReplies();
    const pending = roundTrip(s, 'held-reply');
    await waitFor(() => received.includes('held-reply'));
    expect(await answeredWithin(pending, 300)).toBe(false);
    proxy.unstallReplies();
    expect((await pending).reply).toBe('held-reply');

    proxy.stallReplies();
    let answer = '';
    s.on('data', (chunk: Buffer) => {
      answer += chunk.toString('utf8');
    });
    s.on('error', () => undefined);
    const closed = new Promise<void>((resolve) => s.once('close', () => resolve()));
    s.write('lost-reply');
    await waitFor(() => received.includes('lost-reply'));
    proxy.cut();
    await closed;
    proxy.uncut();
    proxy.unstallReplies();
    expect(answer).toBe('');
  }, 10_000);

  it('as a pg-blackhole, closes neither side and lets new connections in that hear nothing', async () => {
    const open = await connectTo(proxy.port);
    let closed = false;
    open.once('close', () => {
      closed = true;
    });
    proxy.stall();
    const held = roundTrip(open, 'old');
    // A connection opened during the blackhole is accepted (as a silent host's SYN-ACK would be
    // by a middlebox, or one already open) and hears nothing: the client's own timeout must act.
    const late = await connectTo(proxy.port);
    const lateTrip = roundTrip(late, 'new');
    const early = await Promise.race([
      Promise.race([held, lateTrip]).then(() => 'answered'),
      new Promise((r) => setTimeout(() => r('silent'), 500)),
    ]);
    expect(early).toBe('silent');
    expect(closed).toBe(false);
    proxy.unstall();
    expect((await held).reply).toBe('old');
    expect((await lateTrip).reply).toBe('new');
    open.destroy();
    late.destroy();
  }, 10_000);

  it('resets open connections and refuses new ones while cut', async () => {
    const s = await connectTo(proxy.port);
    const closed = new Promise<void>((resolve) => s.once('close', () => resolve()));
    s.on('error', () => undefined);
    proxy.cut();
    await closed;
    const refused = await new Promise<boolean>((resolve) => {
      const t = connect({ host: '127.0.0.1', port: proxy.port });
      t.once('error', () => resolve(true));
      t.once('close', () => resolve(true));
      t.once('data', () => resolve(false));
    });
    expect(refused).toBe(true);
    proxy.uncut();
    const again = await connectTo(proxy.port);
    expect((await roundTrip(again, 'back')).reply).toBe('back');
    again.destroy();
    expect(proxy.stats.resets).toBeGreaterThan(0);
    expect(proxy.stats.refused).toBeGreaterThan(0);
  }, 10_000);
});
