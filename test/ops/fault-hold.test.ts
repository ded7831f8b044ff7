// The hold after a permanent failure (src/ops/fault-hold.ts): one fault per failed batch, a
// hold that doubles while faults follow each other without a decision, and back to the shortest
// hold once a transfer is decided.
import { describe, expect, it } from 'vitest';
import { FAULT_HOLD_MAX_MS, FAULT_HOLD_MIN_MS, FaultHold } from '../../src/ops/fault-hold.ts';

function clocked(): { hold: FaultHold; advance(ms: number): void } {
  let now = 1_000;
  return { hold: new FaultHold(() => now), advance: (ms) => (now += ms) };
}

describe('FaultHold', () => {
  it('holds for FAULT_HOLD_MIN_MS; the riders of the same batch add nothing', () => {
    const { hold, advance } = clocked();
    expect(hold.current()).toBeNull();
    expect(hold.report('permission_denied', 'permission_denied: x')).toMatchObject({ holdMs: FAULT_HOLD_MIN_MS });
    expect(hold.report('permission_denied', 'permission_denied: x')).toBeNull();
    expect(hold.describe()).toBe(`permission_denied: x (not taking jobs for another ${FAULT_HOLD_MIN_MS / 1000} s)`);
    advance(FAULT_HOLD_MIN_MS - 1);
    expect(hold.current()?.kind).toBe('permission_denied');
    advance(1);
    expect(hold.current()).toBeNull();
    expect(hold.describe()).toBeNull();
  });

  it('doubles while the fault comes back without a decision, up to FAULT_HOLD_MAX_MS; a decision resets it', () => {
    const { hold, advance } = clocked();
    const holds: number[] = [];
    for (let i = 0; i < 10; i++) {
      const fault = hold.report('internal_error', 'internal_error: x');
      holds.push(fault?.holdMs ?? -1);
      advance(fault?.holdMs ?? 0);
    }
    expect(holds).toEqual([5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000, 300_000]);
    expect(Math.max(...holds)).toBe(FAULT_HOLD_MAX_MS);
    hold.decided();
    expect(hold.report('internal_error', 'internal_error: x')?.holdMs).toBe(FAULT_HOLD_MIN_MS);
  });
});
