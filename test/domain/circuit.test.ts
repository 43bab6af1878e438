import { describe, expect, it } from 'vitest';
import {
  admit,
  isCallAllowed,
  newCircuit,
  recordFailure,
  recordSuccess,
  refresh,
  reset,
  type Circuit,
} from '../../src/domain/circuit.js';

const T0 = Date.parse('2026-11-30T00:00:00.000Z');
const policy = { probeLeaseMs: 10_000 };
const settings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };

function failTimes(c: Circuit, n: number, now = T0): Circuit {
  for (let i = 0; i < n; i++) c = recordFailure(c, now).circuit;
  return c;
}

describe('domain state machine', () => {
  it('starts closed and allows calls', () => {
    const c = newCircuit('svc', settings, T0);
    expect(c.state).toBe('closed');
    expect(isCallAllowed(c, T0)).toEqual({ allowed: true });
  });

  it('counts failures below the threshold and stays closed', () => {
    const step = recordFailure(failTimes(newCircuit('svc', settings, T0), 1), T0 + 5);
    expect(step.circuit.state).toBe('closed');
    expect(step.circuit.failureCount).toBe(2);
    expect(step.circuit.lastFailureAt).toBe(T0 + 5);
    expect(step.transitions).toEqual([]);
  });

  it('opens when the count reaches the threshold, with one transition', () => {
    const step = recordFailure(failTimes(newCircuit('svc', settings, T0), 2), T0 + 1);
    expect(step.circuit.state).toBe('open');
    expect(step.circuit.openUntil).toBe(T0 + 1 + 30_000);
    expect(step.transitions).toEqual([{ from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: T0 + 1 }]);
  });

  it('uses a per-failure timeout for the opening it causes only, as circuitlog does', () => {
    const c = failTimes(newCircuit('svc', settings, T0), 2);
    const step = recordFailure(c, T0, { timeoutSeconds: 5 });
    expect(step.circuit.openUntil).toBe(T0 + 5_000);
    expect(step.circuit.openTimeoutSeconds).toBe(5);
    expect(step.circuit.timeoutSeconds).toBe(30); // the policy is unchanged
    const later = failTimes(reset(step.circuit, T0 + 1).circuit, 3, T0 + 2);
    expect(later.openUntil).toBe(T0 + 2 + 30_000);
  });

  it('refuses calls while open, with the open time as retry time', () => {
    const c = failTimes(newCircuit('svc', settings, T0), 3);
    expect(isCallAllowed(c, T0 + 29_999)).toEqual({ allowed: false, retryAt: T0 + 30_000 });
  });

  it('does not half-open before the open time has passed', () => {
    const c = failTimes(newCircuit('svc', settings, T0), 3);
    const step = refresh(c, T0 + 29_999);
    expect(step.circuit).toBe(c);
  });

  it('half-opens lazily once the open time has passed', () => {
    const c = failTimes(newCircuit('svc', settings, T0), 3);
    const step = refresh(c, T0 + 30_000);
    expect(step.circuit.state).toBe('half_open');
    expect(step.circuit.halfOpenAt).toBe(T0 + 30_000);
    expect(step.transitions[0]).toMatchObject({ from: 'open', to: 'half_open', reason: 'open_timeout_elapsed' });
  });

  it('closes on a success while half-open', () => {
    const c = refresh(failTimes(newCircuit('svc', settings, T0), 3), T0 + 30_000).circuit;
    const step = recordSuccess(c, T0 + 30_001);
    expect(step.circuit).toMatchObject({ state: 'closed', failureCount: 0, openUntil: null });
    expect(step.transitions).toEqual([{ from: 'half_open', to: 'closed', reason: 'probe_succeeded', at: T0 + 30_001 }]);
  });

  it('re-opens on a failure while half-open, with a later open time', () => {
    const c = refresh(failTimes(newCircuit('svc', settings, T0), 3), T0 + 30_000).circuit;
    const step = recordFailure(c, T0 + 31_000);
    expect(step.circuit.state).toBe('open');
    expect(step.circuit.openUntil).toBe(T0 + 61_000);
    expect(step.transitions[0]).toMatchObject({ from: 'half_open', to: 'open', reason: 'probe_failed' });
  });

  it('resets the count on a success (consecutive-failure semantics)', () => {
    const step = recordSuccess(failTimes(newCircuit('svc', settings, T0), 2), T0);
    expect(step.circuit).toMatchObject({ state: 'closed', failureCount: 0 });
    expect(step.transitions).toEqual([]);
  });

  it('changes nothing for a success on a healthy closed circuit', () => {
    const c = newCircuit('svc', settings, T0);
    expect(recordSuccess(c, T0 + 1).circuit).toBe(c);
    expect(admit(c, T0 + 1, policy).circuit).toBe(c);
  });

  it('admits at most half_open_max_calls probes', () => {
    const two = { ...settings, halfOpenMaxCalls: 2 };
    let c = refresh(failTimes(newCircuit('svc', two, T0), 3), T0 + 30_000).circuit;
    const first = admit(c, T0 + 30_000, policy);
    const second = admit(first.circuit, T0 + 30_001, policy);
    const third = admit(second.circuit, T0 + 30_002, policy);
    expect([first.verdict.allowed, second.verdict.allowed, third.verdict.allowed]).toEqual([true, true, false]);
    expect(third.verdict).toEqual({ allowed: false, retryAt: T0 + 40_000 });
    c = third.circuit;
    expect(c.probeLeases).toHaveLength(2);
  });

  it('frees a probe slot when its lease expires', () => {
    const c = refresh(failTimes(newCircuit('svc', settings, T0), 3), T0 + 30_000).circuit;
    const taken = admit(c, T0 + 30_000, policy).circuit;
    expect(admit(taken, T0 + 39_999, policy).verdict.allowed).toBe(false);
    const later = admit(taken, T0 + 40_000, policy);
    expect(later.verdict.allowed).toBe(true);
    expect(later.circuit.probeLeases).toEqual([T0 + 50_000]);
  });

  it('resets any state to closed with a manual_reset transition', () => {
    const step = reset(failTimes(newCircuit('svc', settings, T0), 3), T0 + 1);
    expect(step.circuit).toMatchObject({ state: 'closed', failureCount: 0, openUntil: null });
    expect(step.transitions[0]).toMatchObject({ from: 'open', to: 'closed', reason: 'manual_reset' });
  });
});
