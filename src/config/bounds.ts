// The one check every tunable number of a component gets at construction: a whole number in
// its named range, or a RangeError that names it.

export function wholeNumberIn(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be a whole number between ${min} and ${max}, got ${value}`);
  }
  return value;
}
