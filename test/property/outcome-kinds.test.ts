import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admit, newCircuit, recordOutcome, type Circuit, type Outcome } from '../../src/domain/circuit.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import type { CircuitPolicy } from '../../src/domain/policy.js';

// Issue 29's property: outcomes that are not the dependency's fault never open a circuit (sent
// with success: false, as a client that counted them as failures would: the kind decides),
// whatever the policy (windows, slow calls, a quorum, a throttle) and whatever their order.

const T0 = Date.parse('2026-11-30T00:00:00.000Z');
const MIN_DEADLINE_MS = POLICY_DEFAULTS.kinds.minDeadlineMs!;

const policyArb: fc.Arbitrary<CircuitPolicy> = fc.record({
  failureThreshold: fc.integer({ min: 1, max: 5 }),
  timeoutSeconds: fc.integer({ min: 1, max: 60 }),
  halfOpenMaxCalls: fc.integer({ min: 1, max: 3 }),
  successThreshold: fc.integer({ min: 1, max: 3 }),
  window: fc.option(
    fc.record({
      type: fc.constantFrom('count' as const, 'time' as const),
      size: fc.integer({ min: 1, max: 20 }),
      minimumCalls: fc.constant(1),
      failureRateThreshold: fc.integer({ min: 1, max: 100 }),
      // A slow-call rule would open on slow successes, which are the dependency's fault (slow); the
      // short deadlines below end before it, as the gateway calls did.
      slowCallDurationMs: fc.constant(null),
      slowCallRateThreshold: fc.constant(100),
    }),
    { nil: null },
  ),
  backoff: fc.constant(null),
  forcedState: fc.constant(null),
  throttle: fc.option(fc.record({ k: fc.constant(2), windowSeconds: fc.integer({ min: 1, max: 60 }) }), { nil: null }),
  quorum: fc.option(
    fc.record({ minCallers: fc.constant(2), windowSeconds: fc.constant(60), maxCallers: fc.constant(10) }),
    {
      nil: null,
    },
  ),
});

const outcomeArb: fc.Arbitrary<Outcome> = fc.oneof(
  fc.constant<Outcome>({ success: false, kind: 'rejected' }),
  fc.constant<Outcome>({ success: true, kind: 'cancelled' }),
  fc
    .integer({ min: 1, max: MIN_DEADLINE_MS - 1 })
    .map((deadlineMs): Outcome => ({ success: false, kind: 'caller_deadline', deadlineMs, durationMs: deadlineMs })),
);
const stepArb = fc.record({
  afterMs: fc.integer({ min: 0, max: 5_000 }),
  outcome: outcomeArb,
  caller: fc.option(fc.constantFrom('a', 'b', 'c'), { nil: undefined }),
  ask: fc.boolean(),
});

describe('outcome kinds (property)', () => {
  it('a circuit whose outcomes are all rejected, cancelled or short-deadline caller_deadline never opens', () => {
    fc.assert(
      fc.property(policyArb, fc.array(stepArb, { maxLength: 200 }), (policy, steps) => {
        let c: Circuit = { ...newCircuit('svc', policy, T0), id: 1 };
        let now = T0;
        for (const s of steps) {
          now += s.afterMs;
          if (s.ask) c = admit(c, now, { probeLeaseMs: 10_000 }, s.caller, () => 0.5).circuit;
          const step = recordOutcome(c, s.caller === undefined ? s.outcome : { ...s.outcome, caller: s.caller }, now);
          c = step.circuit;
          expect(c.state).toBe('closed');
          expect(c.failureCount).toBe(0);
          expect(step.transitions).toEqual([]);
        }
      }),
      { numRuns: 300 },
    );
  });
});
