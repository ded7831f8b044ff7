// A one-shot command's first contact with Redis. BullMQ's connection retries forever, which suits
// a worker and leaves a command that cannot reach Redis printing a reconnect error every second
// and never ending. A command waits here for the connection to become ready, and on its first
// error (or after REDIS_READY_TIMEOUT_MS) stops with one line naming the variable.
import { StartupError } from '../errors.ts';
import { socketProblemOf } from '../ops/socket-problem.ts';
import { describeRedisTarget, type RedisClient, type RedisTarget } from './redis-connection.ts';

/** How long a command waits for Redis to answer at start before it gives up. */
export const REDIS_READY_TIMEOUT_MS = 10_000;

/** The error in words, with the step when it is a refused password (the password itself is never in it). */
export function describeRedisError(err: Error, variable = 'REDIS_URL'): string {
  const socket = socketProblemOf(err);
  if (socket !== null) return socket;
  const message = err.message.trim().replace(/\.$/, '');
  if (/^(WRONGPASS|NOAUTH)/.test(message)) return `${message}: check the password in ${variable}`;
  return message;
}

/** Resolves once `client` is ready; otherwise closes it and throws a StartupError naming the variable. */
export async function redisReachable(
  client: RedisClient,
  target: RedisTarget,
  timeoutMs: number = REDIS_READY_TIMEOUT_MS,
): Promise<void> {
  if (client.status === 'ready') return;
  const variable = target.redisCluster === null ? 'REDIS_URL' : 'REDIS_CLUSTER_NODES';
  const where = `Redis at ${describeRedisTarget(target)}`;
  let onReady = (): void => undefined;
  let onError = (_err: Error): void => undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      onReady = resolve;
      // Listening also keeps the connection's own reporter quiet (see reportErrorsSafely).
      onError = (err) => {
        const reach = socketProblemOf(err) === null ? '' : 'cannot reach ';
        reject(new StartupError([variable], `${reach}${where}: ${describeRedisError(err, variable)}`));
      };
      timer = setTimeout(
        () => reject(new StartupError([variable], `${where}: no answer within ${timeoutMs} ms`)),
        timeoutMs,
      );
      client.once('ready', onReady);
      client.on('error', onError);
    });
  } catch (err) {
    client.disconnect();
    throw err;
  } finally {
    clearTimeout(timer);
    client.removeListener('ready', onReady);
    client.removeListener('error', onError);
  }
}
