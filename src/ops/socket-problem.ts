// What a failed connection's socket error code means, in words, for the one-line errors of the
// commands and the worker (PostgreSQL's and Redis's alike).

export const SOCKET_PROBLEMS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  ETIMEDOUT: 'no answer (timed out)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ECONNRESET: 'connection reset',
};

/** The words for an error's socket `code`, or null when it has none this table knows. */
export function socketProblemOf(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  return (typeof code === 'string' ? SOCKET_PROBLEMS[code] : undefined) ?? null;
}
