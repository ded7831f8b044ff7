// Exponential back-off with full jitter for retrying a busy lock (pure, so it is unit-tested).

/** Above this the ceiling is the cap anyway; keeps 2 ** attempt finite. */
const BACKOFF_EXPONENT_MAX = 52;

/**
 * The wait before retry number `attempt` (0 for the first retry): uniform over the whole
 * range [0, min(capMs, baseMs * 2^attempt)] in whole milliseconds. Full jitter (rather than
 * a fixed or "equal" jitter) spreads contending workers furthest apart, see
 * https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/.
 * `random` returns a number in [0, 1), like Math.random; pass a seeded one for reproducible runs.
 */
export function fullJitterDelayMs(attempt: number, baseMs: number, capMs: number, random: () => number): number {
  if (!Number.isSafeInteger(attempt) || attempt < 0)
    throw new RangeError(`attempt must be a whole number >= 0, got ${attempt}`);
  if (!Number.isSafeInteger(baseMs) || baseMs < 1)
    throw new RangeError(`baseMs must be a whole number >= 1, got ${baseMs}`);
  if (!Number.isSafeInteger(capMs) || capMs < baseMs)
    throw new RangeError(`capMs must be a whole number >= baseMs, got ${capMs}`);
  const draw = random();
  if (!(draw >= 0 && draw < 1)) throw new RangeError(`random() must return a number in [0, 1), got ${draw}`);

  const ceilingMs = Math.min(capMs, baseMs * 2 ** Math.min(attempt, BACKOFF_EXPONENT_MAX));
  return Math.floor(draw * (ceilingMs + 1));
}
