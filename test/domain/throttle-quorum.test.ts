import { describe, expect, it } from 'vitest';
import { admit, newCircuit, recordOutcome, type Circuit } from '../../src/domain/circuit.js';
import { throttleCounts } from '../../src/domain/throttle.js';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const lease = { probeLeaseMs: 10_000 };
const settings = {
  failureThreshold: 3,
  timeoutSeconds: 30,
  halfOpenMaxCalls: 1,
  quorum: { minCallers: 3, windowSeconds: 60, maxCallers: 1_000 },
  throttle: { k: 2, windowSeconds: 60 },
};
const never = () => {
  throw new Error('no draw expected');
};
const always = () => 0; // below any probability above 0: refused

/** A closed circuit whose caller `bad` is isolated by three failures of its own (no quorum: the trip is withheld). */
function isolatedBad(): Circuit {
  let c = newCircuit('svc', settings, T0);
  for (let i = 0; i < 3; i++) c = recordOutcome(c, { success: false, late: 'count_only', caller: 'bad' }, T0).circuit;
  return c;
}

describe('soft throttling beside a quorum (issues 17 and 21)', () => {
  it('refuses an isolated caller with its own scope before the throttle draws or counts', () => {
    const c = isolatedBad();
    expect(c.state).toBe('closed');
    const before = throttleCounts(c.throttle!, c.throttleState, T0 + 1);
    expect(before.requests).toBe(3); // the three failures, reported while closed
    const step = admit(c, T0 + 1, lease, 'bad', never);
    expect(step.verdict).toEqual({ allowed: false, retryAt: T0 + 30_000, scope: 'caller' });
    expect(throttleCounts(step.circuit.throttle!, step.circuit.throttleState, T0 + 1)).toEqual(before);
  });

  it('throttles the other callers of the same closed circuit, counting the refusal as a request', () => {
    const c = isolatedBad();
    const step = admit(c, T0 + 1, lease, 'ok', always);
    expect(step.verdict).toMatchObject({ allowed: false, throttled: { probability: 3 / 4 } });
    expect(step.verdict).not.toHaveProperty('scope');
    expect(throttleCounts(step.circuit.throttle!, step.circuit.throttleState, T0 + 1)).toEqual({
      requests: 4,
      accepts: 0,
    });
  });

  it('gives the isolated caller its probe after the open time without throttling it', () => {
    const c = isolatedBad();
    const probe = admit(c, T0 + 30_000, lease, 'bad', never);
    expect(probe.verdict).toEqual({ allowed: true });
    expect(admit(probe.circuit, T0 + 30_001, lease, 'bad', never).verdict).toMatchObject({
      allowed: false,
      scope: 'caller',
    });
  });
});
