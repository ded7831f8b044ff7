// What a check of the chaos checker is and what it reports. An invariant is a name, a group and a
// function of the facts it declares (its input type): it calls `fail` once per counterexample.
// The checker runs a list of them (runInvariants); adding an invariant is adding one to a list.
// This module imports no other module of the checker, so every check file may import it.
import { COUNTEREXAMPLES_MAX } from '../../src/ledger/reconciliation.ts';

/** Which property a check protects; negative controls are judged by group. */
export type CheckGroup = 'money' | 'exactly-once' | 'queue' | 'input' | 'fence';

export type Counterexample = Record<string, string | number | boolean | null>;

export interface CheckResult {
  readonly name: string;
  readonly group: CheckGroup;
  readonly ok: boolean;
  /** How many items broke it (counterexamples are capped). */
  readonly violations: number;
  /** The violation count is a lower bound (reconcile() stops at COUNTEREXAMPLES_MAX rows). */
  readonly capped: boolean;
  readonly counterexamples: readonly Counterexample[];
}

/** Counts the violations of one check and keeps the first COUNTEREXAMPLES_MAX counterexamples. */
export class Check {
  violations = 0;
  readonly counterexamples: Counterexample[] = [];
  constructor(
    readonly name: string,
    readonly group: CheckGroup,
  ) {}

  fail(example: Counterexample): void {
    this.violations += 1;
    if (this.counterexamples.length < COUNTEREXAMPLES_MAX) this.counterexamples.push(example);
  }

  result(): CheckResult {
    return {
      name: this.name,
      group: this.group,
      ok: this.violations === 0,
      violations: this.violations,
      capped: false,
      counterexamples: this.counterexamples,
    };
  }
}

/** One invariant: `find` reports each violation it finds in the facts it declares (`In`). */
export interface Invariant<In> {
  readonly name: string;
  readonly group: CheckGroup;
  readonly find: (facts: In, fail: (example: Counterexample) => void) => void;
  /** Whether the run makes the claim at all (absent: always); a run it does not apply to does not list it. */
  readonly appliesTo?: (facts: In) => boolean;
}

/** Judges one invariant. */
export function runInvariant<In>(invariant: Invariant<In>, facts: In): CheckResult {
  const check = new Check(invariant.name, invariant.group);
  invariant.find(facts, (example) => check.fail(example));
  return check.result();
}

/** Judges every invariant of the list that applies to the run, in the list's order. */
export function runInvariants<In>(list: readonly Invariant<In>[], facts: In): CheckResult[] {
  return list.filter((i) => i.appliesTo?.(facts) ?? true).map((invariant) => runInvariant(invariant, facts));
}

/** A long text cut to `max` characters, its length said, for a counterexample. */
export function short(value: string, max = 60): string {
  return value.length > max ? `${value.slice(0, max)}…(${value.length} chars)` : value;
}
