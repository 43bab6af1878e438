import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  admit,
  newCircuit,
  recordFailure,
  recordOutcome,
  recordSuccess,
  type Circuit,
} from '../../src/domain/circuit.js';
import { closeCircuit } from '../../src/domain/state-change.js';
import {
  capEjection,
  ejectionLimit,
  isAvailable,
  isEjected,
  panicHolds,
  trips,
  wouldRefuse,
} from '../../src/proxy/guard-rails.js';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const settings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const closed = () => newCircuit('users/dc1-1', settings, T0);

function failTimes(c: Circuit, n: number, now = T0): Circuit {
  for (let i = 0; i < n; i++) c = recordFailure(c, now).circuit;
  return c;
}
const open = () => failTimes(closed(), 3);

describe('ejectionLimit', () => {
  it('rounds the share down', () => {
    expect(ejectionLimit(4, 50)).toBe(2);
    expect(ejectionLimit(5, 50)).toBe(2);
    expect(ejectionLimit(10, 33)).toBe(3);
    expect(ejectionLimit(4, 100)).toBe(4);
  });

  it('always lets one node of two or more be opened', () => {
    expect(ejectionLimit(2, 0)).toBe(1);
    expect(ejectionLimit(3, 10)).toBe(1);
    expect(ejectionLimit(10, 0)).toBe(1);
  });

  it('lets the only node of a one-node upstream open only at 100 percent', () => {
    expect(ejectionLimit(1, 100)).toBe(1);
    expect(ejectionLimit(1, 99)).toBe(0);
    expect(ejectionLimit(1, 0)).toBe(0);
  });

  it('never exceeds the share, except for the one node always allowed', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 0, max: 100 }), (n, p) => {
        const limit = ejectionLimit(n, p);
        expect(limit).toBeLessThanOrEqual(n);
        if (limit > 1) expect(limit * 100).toBeLessThanOrEqual(n * p);
        expect((limit + 1) * 100 > n * p || limit === n).toBe(true); // the largest such count
      }),
    );
  });
});

describe('isEjected', () => {
  it('counts open, half-open and forced-open nodes as out', () => {
    expect(isEjected(open())).toBe(true);
    expect(isEjected({ ...closed(), state: 'half_open' })).toBe(true);
    expect(isEjected({ ...closed(), forcedState: 'open' })).toBe(true);
  });

  it('counts closed and unknown nodes as in', () => {
    expect(isEjected(closed())).toBe(false);
    expect(isEjected(null)).toBe(false);
  });

  it('counts a forced-closed node by its rules', () => {
    expect(isEjected({ ...open(), forcedState: 'closed' })).toBe(true);
    expect(isEjected({ ...closed(), forcedState: 'closed' })).toBe(false);
  });
});

describe('capEjection', () => {
  const tripping = () => recordFailure(failTimes(closed(), 2), T0 + 5);

  it('lets a trip through while the limit has room', () => {
    const step = tripping();
    expect(capEjection(step, failTimes(closed(), 2), 1, 2)).toBe(step);
  });

  it('withholds a trip past the limit: closed, counts started again, one ejection_capped event', () => {
    const before = failTimes(closed(), 2);
    const capped = capEjection(tripping(), before, 2, 2);
    expect(capped.circuit.state).toBe('closed');
    expect(capped.circuit.failureCount).toBe(0);
    expect(capped.circuit.openUntil).toBeNull();
    expect(capped.circuit.lastFailureAt).toBe(T0 + 5);
    expect(capped.transitions).toEqual([{ from: 'closed', to: 'closed', reason: 'ejection_capped', at: T0 + 5 }]);
    expect(trips(capped)).toBe(false);
  });

  it('leaves a step alone whose only trip is a shadow policy\u2019s (issue 31): the node is not ejected', () => {
    const step = tripping();
    const shadowTrip = {
      ...step,
      circuit: failTimes(closed(), 3 - 1),
      transitions: [{ ...step.transitions[0]!, shadow: true as const }],
    };
    expect(trips(shadowTrip)).toBe(false);
    expect(capEjection(shadowTrip, failTimes(closed(), 2), 2, 2)).toBe(shadowTrip);
  });

  it('resets what closing resets, throttle included, keeping the state-change time', () => {
    const before = failTimes(closed(), 2);
    const step = tripping();
    const throttled = { ...step, circuit: { ...step.circuit, throttleState: { type: 'time' as const, buckets: [] } } };
    const capped = capEjection(throttled, before, 2, 2).circuit;
    const closing = closeCircuit(throttled.circuit, T0 + 5, 'manual_reset').circuit;
    expect(capped).toEqual({ ...closing, stateChangedAt: before.stateChangedAt });
    expect(capped.throttleState).toBeNull();
    expect(capped.updatedAt).toBe(T0 + 5);
  });

  it('needs failure_threshold new failures to trip again after a withheld trip', () => {
    let c = capEjection(tripping(), failTimes(closed(), 2), 2, 2).circuit;
    c = failTimes(c, 2, T0 + 6);
    expect(c.state).toBe('closed');
    expect(trips(recordFailure(c, T0 + 7))).toBe(true);
  });

  it('withholds a window trip too, and empties the window', () => {
    const window = {
      type: 'count' as const,
      size: 4,
      minimumCalls: 4,
      failureRateThreshold: 50,
      slowCallDurationMs: null,
      slowCallRateThreshold: 100,
    };
    let c: Circuit = { ...closed(), failureThreshold: 100, window };
    for (const success of [true, false, true]) c = recordOutcome(c, { success }, T0).circuit;
    const step = recordOutcome(c, { success: false }, T0 + 1);
    expect(step.transitions[0]?.reason).toBe('failure_rate_exceeded');
    const capped = capEjection(step, c, 1, 1);
    expect(capped.transitions).toEqual([{ from: 'closed', to: 'closed', reason: 'ejection_capped', at: T0 + 1 }]);
    expect(capped.circuit.windowState).toBeNull();
  });

  it('never withholds a failed probe: re-opening a half-open node ejects no one more', () => {
    const halfOpen = admit(open(), T0 + 30_000, { probeLeaseMs: 10_000 }).circuit;
    const step = recordFailure(halfOpen, T0 + 30_001);
    expect(step.transitions[0]).toMatchObject({ from: 'half_open', to: 'open' });
    expect(capEjection(step, halfOpen, 3, 1)).toBe(step);
  });

  it('passes steps that do not trip unchanged', () => {
    const step = recordFailure(closed(), T0);
    expect(capEjection(step, closed(), 9, 1)).toBe(step);
    const success = recordSuccess(failTimes(closed(), 1), T0);
    expect(capEjection(success, closed(), 9, 1)).toBe(success);
  });
});

describe('isAvailable', () => {
  it('is true for closed, forced-closed and unknown nodes', () => {
    expect(isAvailable(closed(), T0)).toBe(true);
    expect(isAvailable({ ...open(), forcedState: 'closed' }, T0)).toBe(true);
    expect(isAvailable(null, T0)).toBe(true);
  });

  it('is false for an open node inside its open time and for a forced-open node', () => {
    expect(isAvailable(open(), T0 + 29_999)).toBe(false);
    expect(isAvailable({ ...closed(), forcedState: 'open' }, T0)).toBe(false);
  });

  it('is true for a half-open node with a free probe slot, false once the slot is taken', () => {
    expect(isAvailable(open(), T0 + 30_000)).toBe(true); // about to half-open, no probe out
    const probing = admit(open(), T0 + 30_000, { probeLeaseMs: 10_000 }).circuit;
    expect(probing.state).toBe('half_open');
    expect(isAvailable(probing, T0 + 30_001)).toBe(false);
    expect(isAvailable(probing, T0 + 40_000)).toBe(true); // the lease ran out
  });
});

describe('panicHolds', () => {
  it('holds when fewer than the share are available', () => {
    expect(panicHolds(1, 4, 50)).toBe(true);
    expect(panicHolds(0, 4, 50)).toBe(true);
  });

  it('does not hold at exactly the share', () => {
    expect(panicHolds(2, 4, 50)).toBe(false);
    expect(panicHolds(4, 4, 100)).toBe(false);
  });

  it('never holds with the threshold at 0 (off)', () => {
    expect(panicHolds(0, 4, 0)).toBe(false);
  });

  it('holds at 100 percent whenever one node is unavailable', () => {
    expect(panicHolds(3, 4, 100)).toBe(true);
  });
});

describe('wouldRefuse', () => {
  it('is true for a forced-closed node whose rules have it open', () => {
    expect(wouldRefuse({ ...open(), forcedState: 'closed' }, T0 + 1)).toBe(true);
  });

  it('is false once the open time has passed (the rules would let a probe through)', () => {
    expect(wouldRefuse({ ...open(), forcedState: 'closed' }, T0 + 30_000)).toBe(false);
  });

  it('is false for an unforced node and for a forced-closed node that is closed', () => {
    expect(wouldRefuse(open(), T0 + 1)).toBe(false);
    expect(wouldRefuse({ ...closed(), forcedState: 'closed' }, T0)).toBe(false);
    expect(wouldRefuse(null, T0)).toBe(false);
  });
});
