// The HA run's rules on hand-made fault records and decision times: the formation's faults ran to
// their end (a failed one, or a scheduled kind that never happened, fails the run), and the write
// outage is the longest gap between two decisions around the fault.
import { describe, expect, it } from 'vitest';
import type { FaultRecord } from '../../../harness/chaos/faults.ts';
import { formationFaultsCheck, longestGap } from '../../../harness/chaos/pg-outage.ts';

function fault(id: number, kind: FaultRecord['kind'], error: string | null = null): FaultRecord {
  return { id, kind, startMs: id * 1000, endMs: id * 1000 + 500, worker: null, link: null, detail: kind, error };
}

describe('formationFaultsCheck', () => {
  it('passes a run whose failover, switchover and standby kill all ended', () => {
    const r = formationFaultsCheck([fault(1, 'pg-failover'), fault(2, 'pg-switchover'), fault(3, 'pg-standby-kill')]);
    expect(r.ok).toBe(true);
    expect(r.name).toContain('1 failovers, 1 switchovers, 1 standbys killed');
  });

  it('fails a fault that errored, and a scheduled kind that never happened', () => {
    const r = formationFaultsCheck([
      fault(1, 'pg-failover'),
      fault(2, 'pg-switchover', 'Command failed: pg_autoctl perform switchover'),
    ]);
    expect(r.ok).toBe(false);
    expect(r.counterexamples).toEqual([
      { fault: 2, kind: 'pg-switchover', error: 'Command failed: pg_autoctl perform switchover' },
      { kind: 'pg-switchover', problem: 'scheduled, never done' },
    ]);
  });

  it('judges nothing in a run without the formation', () => {
    expect(formationFaultsCheck([fault(1, 'kill-worker', 'gone')]).ok).toBe(true);
  });
});

describe('longestGap', () => {
  it('is the longest gap that ends after the start and begins before the end', () => {
    expect(longestGap([0, 100, 200, 5_200, 5_300, 20_000], 150, 5_250)).toEqual({ stopped: 200, resumed: 5_200 });
    expect(longestGap([0, 100], 1_000, 2_000)).toBeNull();
  });
});
