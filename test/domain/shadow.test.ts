import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit, type CircuitPolicy, type Outcome } from '../../src/domain/circuit.js';
import { transitionEntries } from '../../src/domain/history.js';
import { resolvePolicy } from '../../src/domain/policy.js';
import {
  advanceShadow,
  promotedPolicy,
  refreshShadow,
  resetShadow,
  shadowWouldRefuse,
  withShadowPolicy,
} from '../../src/domain/shadow.js';
import { outcomeStep } from '../../src/service/breaker-service.js';

// The shadow policy (issue 31): a second circuit on the live one, run by the same functions.

const POLICY = { probeLeaseMs: 10_000 };
const LIVE = resolvePolicy({ failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 });
const STRICT: CircuitPolicy = { ...LIVE, failureThreshold: 2 };
const T0 = 1_000_000;

/** A live circuit with a shadow of `shadow`, and the step recording one outcome on it at `now`. */
const shadowed = (shadow: CircuitPolicy, live: CircuitPolicy = LIVE): Circuit =>
  withShadowPolicy(newCircuit('svc', live, T0), shadow, T0);
const step = (c: Circuit, outcome: Outcome, now: number) =>
  outcomeStep({ name: 'svc', settings: LIVE, now, policy: POLICY }, outcome)(c);

describe('the shadow policy', () => {
  it('opens in shadow while the live circuit stays closed; its transitions are marked', () => {
    let c = shadowed(STRICT);
    const transitions = [];
    for (let i = 0; i < 2; i++) {
      const s = step(c, { success: false }, T0 + i);
      transitions.push(...s.transitions);
      c = s.circuit;
    }
    expect(c.state).toBe('closed');
    expect(c.failureCount).toBe(2);
    expect(c.shadow?.circuit.state).toBe('open');
    expect(transitions).toEqual([
      { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: T0 + 1, shadow: true },
    ]);
    expect(c.shadow).toMatchObject({ outcomes: 2, refused: 0, openings: 1 });
    expect(shadowWouldRefuse(c, T0 + 2, POLICY)).toBe(true);
  });

  it('counts an outcome that arrives while the shadow refuses as refused, and does not feed it', () => {
    let c = shadowed(STRICT);
    for (let i = 0; i < 2; i++) c = step(c, { success: false }, T0 + i).circuit;
    const s = step(c, { success: true }, T0 + 5);
    // Fed, a success would close the shadow (circuitlog's late rule): it was refused instead.
    expect(s.circuit.shadow?.circuit.state).toBe('open');
    expect(s.circuit.shadow).toMatchObject({ outcomes: 2, refused: 1, openings: 1 });
    expect(s.transitions).toEqual([]);
  });

  it('feeds an outcome that arrives while the live circuit refuses too, as the live one is fed', () => {
    let c = shadowed(STRICT, { ...LIVE, failureThreshold: 2 });
    for (let i = 0; i < 2; i++) c = step(c, { success: false }, T0 + i).circuit;
    expect([c.state, c.shadow?.circuit.state]).toEqual(['open', 'open']);
    const s = step(c, { success: true }, T0 + 5);
    expect([s.circuit.state, s.circuit.shadow?.circuit.state]).toEqual(['closed', 'closed']);
    expect(s.circuit.shadow).toMatchObject({ outcomes: 3, refused: 0 });
  });

  it('makes the live circuit\u2019s own transitions when its policy is the live one (the same functions)', () => {
    const window = { type: 'count' as const, size: 4, minimumCalls: 2, failureRateThreshold: 50 };
    const live = resolvePolicy({
      ...LIVE,
      successThreshold: 2,
      window: { ...window, slowCallDurationMs: null, slowCallRateThreshold: 100 },
    });
    const outcomes = fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 40_000 })), { maxLength: 60 });
    const lateRule = fc.constantFrom('circuitlog' as const, 'count_only' as const);
    fc.assert(
      fc.property(outcomes, lateRule, (list, late) => {
        let c = shadowed(live, live);
        let now = T0;
        for (const [success, gap] of list) {
          now += gap;
          const s = step(c, { success, late }, now);
          const own = s.transitions.filter((t) => t.shadow !== true);
          const shadows = s.transitions.filter((t) => t.shadow === true).map(({ shadow: _s, ...t }) => t);
          expect(shadows).toEqual(own);
          c = s.circuit;
          expect(c.shadow!.circuit.state).toBe(c.state);
        }
        expect(c.shadow!.refused).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it('never changes the live circuit: the live step is what it is without a shadow', () => {
    let plain = newCircuit('svc', LIVE, T0);
    let c = shadowed(STRICT);
    for (let i = 0; i < 12; i++) {
      const outcome = { success: i % 3 === 0 };
      plain = recordOutcome(plain, outcome, T0 + i * 1_000).circuit;
      c = step(c, outcome, T0 + i * 1_000).circuit;
      const { shadow: _shadow, ...live } = c;
      expect(live).toEqual(plain);
    }
  });

  it('half-opens after its own open time, stamped at its open_until, when refreshed', () => {
    let c = shadowed(STRICT);
    for (let i = 0; i < 2; i++) c = step(c, { success: false }, T0 + i).circuit;
    const openUntil = c.shadow!.circuit.openUntil!;
    const s = refreshShadow({ circuit: c, transitions: [] }, openUntil + 5_000);
    expect(s.transitions).toEqual([
      { from: 'open', to: 'half_open', reason: 'open_timeout_elapsed', at: openUntil, shadow: true },
    ]);
    expect(refreshShadow({ circuit: c, transitions: [] }, openUntil - 1).circuit).toBe(c);
  });

  it('is reset with the live circuit (a person said the dependency is fine)', () => {
    let c = shadowed(STRICT);
    for (let i = 0; i < 2; i++) c = step(c, { success: false }, T0 + i).circuit;
    const s = resetShadow({ circuit: c, transitions: [] }, T0 + 10);
    expect(s.circuit.shadow?.circuit.state).toBe('closed');
    expect(s.transitions).toEqual([{ from: 'open', to: 'closed', reason: 'manual_reset', at: T0 + 10, shadow: true }]);
  });

  it('keeps its state when set to the same policy, starts afresh on another, and is forgotten on null', () => {
    let c = shadowed(STRICT);
    c = step(c, { success: false }, T0 + 1).circuit;
    expect(withShadowPolicy(c, STRICT, T0 + 2)).toBe(c);
    const other = withShadowPolicy(c, { ...STRICT, failureThreshold: 3 }, T0 + 2);
    expect(other.shadow).toMatchObject({ outcomes: 0, since: T0 + 2 });
    expect(other.shadow?.circuit.failureCount).toBe(0);
    const cleared = withShadowPolicy(c, null, T0 + 3);
    expect(cleared).not.toHaveProperty('shadow');
    expect(withShadowPolicy(cleared, null, T0 + 4)).toBe(cleared);
  });

  it('is never forced, and a promotion keeps the live circuit\u2019s force', () => {
    const live: CircuitPolicy = { ...LIVE, forcedState: 'closed' };
    const c = withShadowPolicy(newCircuit('svc', live, T0), { ...STRICT, forcedState: 'open' }, T0);
    expect(c.shadow?.circuit.forcedState).toBeNull();
    expect(promotedPolicy(c)).toMatchObject({ failureThreshold: 2, forcedState: 'closed' });
    expect(promotedPolicy(newCircuit('svc', LIVE, T0))).toBeNull();
  });

  it('is left out of the outcome history, which holds the live circuit\u2019s transitions only', () => {
    const live = { from: 'closed' as const, to: 'open' as const, reason: 'failure_threshold_reached' as const, at: T0 };
    const entries = transitionEntries(T0, [live, { ...live, shadow: true }]);
    expect(entries.map((e) => e.transition)).toEqual([live]);
  });

  it('leaves a circuit without a shadow as it is', () => {
    const c = newCircuit('svc', LIVE, T0);
    const s = { circuit: c, transitions: [] };
    expect(advanceShadow(c, s, { success: false }, T0, POLICY)).toBe(s);
    expect(refreshShadow(s, T0)).toBe(s);
    expect(shadowWouldRefuse(c, T0, POLICY)).toBe(false);
  });
});
