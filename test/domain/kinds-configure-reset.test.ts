import { describe, expect, it } from 'vitest';
import {
  configure,
  newCircuit,
  recordOutcome,
  reset,
  type Circuit,
  type CircuitPolicy,
  type CircuitSettings,
} from '../../src/domain/circuit.js';
import { resolvePolicy } from '../../src/domain/policy.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';

// Issue 29's policy fields under configure (PATCH) and an operator reset, found by the
// state-machine vectors (clients/spec/generator/cases-kinds.ts, cases-cooling.ts).

const T0 = 1_000_000;
const BASE: CircuitSettings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const policy = (p: Partial<CircuitPolicy> = {}): CircuitPolicy => resolvePolicy({ ...BASE, ...p });
const circuit = (p: Partial<CircuitPolicy> = {}): Circuit => newCircuit('svc', policy(p), T0);
const REJECTED_FAILS = { ...POLICY_DEFAULTS.kinds, countAs: { rejected: 'failure' as const } };
const RAMP = { seconds: 10, startPercent: 10 };

describe('configure with issue 29 fields', () => {
  it('drops count_as when the new policy has none: a rejected call is a success again', () => {
    const c = configure(circuit({ kinds: REJECTED_FAILS }), policy(), T0).circuit;
    expect(c.kinds).toBeUndefined();
    expect(recordOutcome(c, { success: false, kind: 'rejected' }, T0 + 1).circuit.failureCount).toBe(0);
  });

  it('drops the ramp when the new policy turns it off', () => {
    expect(configure(circuit({ ramp: RAMP }), policy(), T0).circuit.ramp).toBeUndefined();
  });
});

describe('an operator reset of a closed circuit', () => {
  it('is a closed -> closed manual_reset event when it ends a cool-down', () => {
    const cooling = recordOutcome(circuit(), { success: false, kind: 'throttled', retryAfterSeconds: 60 }, T0).circuit;
    expect(reset(cooling, T0 + 1).transitions).toEqual([
      { from: 'closed', to: 'closed', reason: 'manual_reset', at: T0 + 1 },
    ]);
  });

  it('is a closed -> closed manual_reset event when it ends a ramp in force, and none once the ramp is over', () => {
    const ramping = { ...circuit({ ramp: RAMP }), rampUntil: T0 + 10_000 };
    expect(reset(ramping, T0 + 1).transitions).toEqual([
      { from: 'closed', to: 'closed', reason: 'manual_reset', at: T0 + 1 },
    ]);
    expect(reset(ramping, T0 + 10_000).transitions).toEqual([]);
  });

  it('makes no event when nothing was in force (as before issue 29)', () => {
    const c = recordOutcome(circuit(), { success: false }, T0).circuit;
    expect(reset(c, T0 + 1).transitions).toEqual([]);
  });
});
