import { describe, expect, it } from 'vitest';
import { admit, configure, newCircuit, recordOutcome, refresh, reset, type Circuit } from '../../src/domain/circuit.js';
import { policyOf } from '../../src/domain/policy.js';
import { currentThrottleProbability, throttleCounts } from '../../src/domain/throttle.js';

const T0 = Date.parse('2026-11-30T00:00:00.000Z');
const lease = { probeLeaseMs: 10_000 };
const throttle = { k: 2, windowSeconds: 60 };
const settings = { failureThreshold: 1_000, timeoutSeconds: 30, halfOpenMaxCalls: 1, throttle };

const never = () => {
  throw new Error('no draw expected');
};
const always = () => 0; // below any probability above 0: refused
const counts = (c: Circuit, now = T0) => throttleCounts(c.throttle!, c.throttleState, now);

/** `n` outcomes at `now`, the first `successes` of them successes. */
function feed(c: Circuit, n: number, successes: number, now = T0): Circuit {
  for (let i = 0; i < n; i++) c = recordOutcome(c, { success: i < successes, late: 'count_only' }, now).circuit;
  return c;
}

describe('soft throttling in the breaker', () => {
  it('admits every call on a healthy circuit without drawing or writing', () => {
    const c = feed(newCircuit('svc', settings, T0), 10, 10);
    const step = admit(c, T0, lease, undefined, never);
    expect(step.verdict).toEqual({ allowed: true });
    expect(step.circuit).toBe(c);
  });

  it('counts outcomes reported while closed: every one a request, a success an accept', () => {
    const c = feed(newCircuit('svc', settings, T0), 10, 3);
    expect(counts(c)).toEqual({ requests: 10, accepts: 3 });
    expect(c.state).toBe('closed');
  });

  it('refuses with the probability drawn against, retry in 1 s, and counts the refusal as a request', () => {
    const c = feed(newCircuit('svc', settings, T0), 10, 3);
    const step = admit(c, T0 + 5, lease, undefined, always);
    expect(step.verdict).toEqual({ allowed: false, retryAt: T0 + 5 + 1_000, throttled: { probability: 4 / 11 } });
    expect(step.transitions).toEqual([]);
    expect(counts(step.circuit, T0 + 5)).toEqual({ requests: 11, accepts: 3 });
  });

  it('a refusal is not an outcome: the failure count and the window are unchanged', () => {
    const window = {
      type: 'count' as const,
      size: 10,
      minimumCalls: null,
      failureRateThreshold: 90,
      slowCallDurationMs: null,
      slowCallRateThreshold: 100,
    };
    const c = feed(newCircuit('svc', { ...settings, window }, T0), 10, 3);
    const refused = admit(c, T0, lease, undefined, always).circuit;
    expect(refused.failureCount).toBe(c.failureCount);
    expect(refused.windowState).toBe(c.windowState);
    expect(refused.lastFailureAt).toBe(c.lastFailureAt);
  });

  it('admits when the draw is at or above the probability, changing nothing', () => {
    const c = feed(newCircuit('svc', settings, T0), 10, 3);
    const step = admit(c, T0, lease, undefined, () => 4 / 11);
    expect(step.verdict).toEqual({ allowed: true });
    expect(step.circuit).toBe(c);
  });

  it('never throttles a circuit forced closed, and a forced open one is refused as forced', () => {
    const c = feed(newCircuit('svc', settings, T0), 10, 0);
    expect(admit({ ...c, forcedState: 'closed' }, T0, lease, undefined, always).verdict).toEqual({ allowed: true });
    expect(admit({ ...c, forcedState: 'open' }, T0, lease, undefined, always).verdict).toMatchObject({
      allowed: false,
      forced: true,
    });
  });

  it('starts its counts empty when the circuit opens, and again when it closes', () => {
    let c = feed(newCircuit('svc', { ...settings, failureThreshold: 5 }, T0), 4, 0);
    expect(counts(c).requests).toBe(4);
    c = recordOutcome(c, { success: false }, T0).circuit;
    expect(c.state).toBe('open');
    expect(c.throttleState).toBeNull();
    c = refresh(c, T0 + 30_000).circuit;
    expect(c.state).toBe('half_open');
    expect(admit(c, T0 + 30_000, lease, undefined, never).verdict).toEqual({ allowed: true }); // a probe, not throttled
    c = recordOutcome(admit(c, T0 + 30_000, lease, undefined, never).circuit, { success: true }, T0 + 30_001).circuit;
    expect(c.state).toBe('closed');
    expect(c.throttleState).toBeNull();
    expect(currentThrottleProbability(c.throttle!, c.throttleState, T0 + 30_001)).toBe(0);
  });

  it('empties its counts on an operator reset', () => {
    const c = feed(newCircuit('svc', settings, T0), 10, 0);
    const step = reset(c, T0);
    expect(step.circuit.throttleState).toBeNull();
  });

  it('keeps its counts when only k changes, and empties them when the window changes or it is turned off', () => {
    const c = feed(newCircuit('svc', settings, T0), 10, 3);
    const policy = policyOf(c);
    expect(configure(c, { ...policy, throttle: { k: 3, windowSeconds: 60 } }, T0).circuit.throttleState).toBe(
      c.throttleState,
    );
    expect(configure(c, { ...policy, throttle: { k: 2, windowSeconds: 30 } }, T0).circuit.throttleState).toBeNull();
    expect(configure(c, { ...policy, throttle: null }, T0).circuit.throttleState).toBeNull();
  });

  it('writes on a success of a healthy circuit only when a throttle counts it', () => {
    const off = newCircuit('svc', { ...settings, throttle: null }, T0);
    expect(recordOutcome(off, { success: true }, T0).circuit).toBe(off);
    const on = newCircuit('svc', settings, T0);
    expect(recordOutcome(on, { success: true }, T0).circuit).not.toBe(on);
  });

  it('lets old requests leave the window: p falls back to 0 once the failures are older than window_seconds', () => {
    const c = feed(newCircuit('svc', settings, T0), 50, 0);
    expect(currentThrottleProbability(c.throttle!, c.throttleState, T0 + 59_999)).toBe(50 / 51);
    expect(admit(c, T0 + 60_000, lease, undefined, never).verdict).toEqual({ allowed: true });
  });
});
