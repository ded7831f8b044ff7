// The project's one whole-number check: a tunable number given as text (an environment variable,
// a command-line flag) or as a number (a component's option) is a whole number in its named
// range, or an error that names it. Each caller keeps its own error class (ConfigError,
// UsageError, RangeError) by passing a factory that words the fault its way.

/** Why a value was refused, for the caller's error factory to word. */
export interface WholeNumberFault {
  /** What was being read: a variable, a flag, an option. */
  readonly name: string;
  readonly min: number;
  readonly max: number;
  /** The value as given: the text, or the number written out. */
  readonly given: string;
  /** `not-whole`: not written as a whole number at all; `out-of-range`: one, outside min..max. */
  readonly problem: 'not-whole' | 'out-of-range';
}

export type WholeNumberError = (fault: WholeNumberFault) => Error;

/** Canonical decimal digits only: no sign, point, exponent, space, hex prefix or leading zero. */
const WHOLE_NUMBER_TEXT = /^(0|[1-9][0-9]*)$/;

/** The default wording, for a component's options: a RangeError. */
export const wholeNumberRangeError: WholeNumberError = ({ name, min, max, given }) =>
  new RangeError(`${name} must be a whole number between ${min} and ${max}, got ${given}`);

/**
 * `text` read as a whole number from `min` to `max` (both safe integers). Refuses everything but
 * canonical decimal digits: `+5`, `-5`, ` 5`, `5.0`, `1e3`, `0x10` and `05` alike.
 */
export function parseWholeNumber(
  text: string,
  name: string,
  min: number,
  max: number,
  error: WholeNumberError = wholeNumberRangeError,
): number {
  if (!WHOLE_NUMBER_TEXT.test(text)) throw error({ name, min, max, given: text, problem: 'not-whole' });
  // Digits past 2^53 round; any such value is far above every max, so it is refused as out of range.
  const value = Number(text);
  if (value < min || value > max) throw error({ name, min, max, given: text, problem: 'out-of-range' });
  return value;
}

/** `value` itself when it is a whole number from `min` to `max`; for options given as numbers. */
export function wholeNumberIn(
  name: string,
  value: number,
  min: number,
  max: number,
  error: WholeNumberError = wholeNumberRangeError,
): number {
  if (!Number.isSafeInteger(value)) throw error({ name, min, max, given: String(value), problem: 'not-whole' });
  if (value < min || value > max) throw error({ name, min, max, given: String(value), problem: 'out-of-range' });
  return value;
}
