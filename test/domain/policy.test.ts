import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  admit,
  configure,
  effectiveTimeoutSeconds,
  newCircuit,
  recordOutcome,
  refresh,
  windowStats,
  type Circuit,
  type Outcome,
} from '../../src/domain/circuit.js';
import { policyOf, type CircuitPolicy, type WindowPolicy } from '../../src/domain/policy.js';

const T0 = Date.parse('2026-11-30T00:00:00.000Z');
const lease = { probeLeaseMs: 10_000 };
const base = { failureThreshold: 1_000, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const countWindow = (size: number, extra: Partial<WindowPolicy> = {}): WindowPolicy => ({
  type: 'count',
  size,
  minimumCalls: null,
  failureRateThreshold: 50,
  slowCallDurationMs: null,
  slowCallRateThreshold: 100,
  ...extra,
});
const timeWindow = (size: number, extra: Partial<WindowPolicy> = {}): WindowPolicy => ({
  ...countWindow(size, extra),
  type: 'time',
});

function feed(c: Circuit, outcomes: readonly Outcome[], now = T0): Circuit {
  for (const o of outcomes) c = recordOutcome(c, o, now).circuit;
  return c;
}
const ok: Outcome = { success: true, late: 'count_only' };
const bad: Outcome = { success: false, late: 'count_only' };

/** A circuit opened by failures at T0 (threshold 1), half-open at T0 + its open time. */
function halfOpen(extra: Partial<CircuitPolicy> = {}): Circuit {
  const c = recordOutcome(newCircuit('svc', { ...base, failureThreshold: 1, ...extra }, T0), bad, T0).circuit;
  return refresh(c, T0 + effectiveTimeoutSeconds(c) * 1000).circuit;
}

describe('success threshold', () => {
  it('keeps a half-open circuit half-open until that many probes succeed in a row', () => {
    let c = halfOpen({ successThreshold: 3 });
    const at = c.halfOpenAt!;
    c = recordOutcome(c, ok, at).circuit;
    c = recordOutcome(c, ok, at).circuit;
    expect(c.state).toBe('half_open');
    expect(c.probeSuccesses).toBe(2);
    const step = recordOutcome(c, ok, at);
    expect(step.circuit.state).toBe('closed');
    expect(step.transitions.map((t) => t.reason)).toEqual(['probe_succeeded']);
  });

  it('frees the probe slot of a probe that succeeded without closing', () => {
    let c = halfOpen({ successThreshold: 2 });
    const at = c.halfOpenAt!;
    c = admit(c, at, lease).circuit;
    expect(admit(c, at, lease).verdict.allowed).toBe(false);
    c = recordOutcome(c, ok, at).circuit;
    expect(admit(c, at, lease).verdict.allowed).toBe(true);
  });

  it('re-opens on a probe failure after some successes, starting the count again', () => {
    let c = halfOpen({ successThreshold: 3 });
    c = recordOutcome(c, ok, c.halfOpenAt!).circuit;
    const step = recordOutcome(c, bad, c.halfOpenAt!);
    expect(step.circuit.state).toBe('open');
    expect(step.circuit.probeSuccesses).toBe(0);
    expect(step.transitions.map((t) => t.reason)).toEqual(['probe_failed']);
  });
});

describe('count window', () => {
  const withWindow = (w: WindowPolicy) => newCircuit('svc', { ...base, window: w }, T0);

  it('does not open before minimum_calls outcomes, whatever the rate', () => {
    const c = feed(withWindow(countWindow(10, { minimumCalls: 4 })), [bad, bad, bad]);
    expect(c.state).toBe('closed');
    expect(windowStats(c, T0)).toEqual({ calls: 3, failures: 3, slowCalls: 0, failureRate: 100, slowCallRate: 0 });
  });

  it('opens exactly at the failure rate, with reason failure_rate_exceeded', () => {
    const c = feed(withWindow(countWindow(4)), [ok, bad, ok]);
    expect(c.state).toBe('closed');
    const step = recordOutcome(c, bad, T0); // 2 of 4 = 50 %
    expect(step.circuit.state).toBe('open');
    expect(step.transitions).toEqual([{ from: 'closed', to: 'open', reason: 'failure_rate_exceeded', at: T0 }]);
  });

  it('stays closed just under the rate', () => {
    const c = feed(withWindow(countWindow(5, { failureRateThreshold: 50 })), [ok, bad, ok, bad, ok]); // 40 %
    expect(c.state).toBe('closed');
    expect(windowStats(c, T0)?.failureRate).toBe(40);
  });

  it('keeps only the last size outcomes', () => {
    const c = feed(withWindow(countWindow(3, { failureRateThreshold: 100 })), [bad, bad, ok, ok, ok]);
    expect(windowStats(c, T0)).toMatchObject({ calls: 3, failures: 0 });
  });

  it('counts slow calls, opening on the slow-call rate; a slow success is still a success', () => {
    const w = countWindow(2, { slowCallDurationMs: 100, slowCallRateThreshold: 100 });
    let c = feed(newCircuit('svc', { ...base, failureThreshold: 1, window: w }, T0), [{ ...ok, durationMs: 150 }]);
    expect(c.failureCount).toBe(0);
    expect(c.state).toBe('closed');
    const step = recordOutcome(c, { ...ok, durationMs: 100 }, T0); // exactly at the duration: slow
    expect(step.circuit.state).toBe('open');
    expect(step.transitions[0]!.reason).toBe('slow_call_rate_exceeded');
    c = feed(withWindow(w), [
      { ...ok, durationMs: 99 },
      { ...ok, durationMs: 99.9 },
    ]);
    expect(windowStats(c, T0)).toMatchObject({ calls: 2, slowCalls: 0 });
  });

  it('ignores durations when slow_call_duration_ms is not set', () => {
    const c = feed(withWindow(countWindow(2)), [
      { ...ok, durationMs: 1e6 },
      { ...ok, durationMs: 1e6 },
    ]);
    expect(windowStats(c, T0)?.slowCalls).toBe(0);
  });

  it('trips on consecutive failures first when both would', () => {
    const c = newCircuit('svc', { ...base, failureThreshold: 2, window: countWindow(2) }, T0);
    const step = recordOutcome(recordOutcome(c, bad, T0).circuit, bad, T0);
    expect(step.transitions[0]!.reason).toBe('failure_threshold_reached');
  });

  it('is emptied on every state change', () => {
    const opened = feed(withWindow(countWindow(2)), [bad, bad]);
    expect(opened.state).toBe('open');
    expect(windowStats(opened, T0)?.calls).toBe(0);
  });

  it('rounds rates to 2 decimals', () => {
    const c = feed(withWindow(countWindow(3, { failureRateThreshold: 100 })), [bad, ok, ok]);
    expect(windowStats(c, T0)?.failureRate).toBe(33.33);
  });
});

describe('time window', () => {
  const withWindow = (w: WindowPolicy) => newCircuit('svc', { ...base, window: w }, T0);

  it('drops the bucket that just expired, in a read with no outcome since', () => {
    const c = feed(withWindow(timeWindow(10, { minimumCalls: 100 })), [bad, bad], T0 + 500);
    expect(windowStats(c, T0 + 9_999)?.calls).toBe(2); // second T0 is still one of the last 10
    expect(windowStats(c, T0 + 10_000)?.calls).toBe(0); // and now it is not
  });

  it('defaults minimum_calls to 10', () => {
    let c = withWindow(timeWindow(60));
    for (let i = 0; i < 9; i++) c = recordOutcome(c, bad, T0 + i).circuit;
    expect(c.state).toBe('closed');
    expect(recordOutcome(c, bad, T0 + 9).circuit.state).toBe('open');
  });

  it('judges only outcomes of the last size seconds when deciding', () => {
    let c = withWindow(timeWindow(5, { minimumCalls: 2 }));
    c = recordOutcome(c, bad, T0).circuit;
    c = recordOutcome(c, ok, T0 + 5_000).circuit; // the failure expired: 0 of 1
    c = recordOutcome(c, ok, T0 + 5_001).circuit; // 0 of 2
    expect(c.state).toBe('closed');
  });
});

describe('backoff', () => {
  const backoff = { multiplier: 2, maxTimeoutSeconds: 100 };

  it('grows the open time by the multiplier after each failed probe, up to the cap', () => {
    let c = halfOpen({ timeoutSeconds: 30, backoff });
    expect(c.reopenCount).toBe(0);
    const seen: number[] = [];
    for (let i = 0; i < 4; i++) {
      c = recordOutcome(c, bad, c.halfOpenAt!).circuit;
      seen.push(effectiveTimeoutSeconds(c));
      expect(c.openUntil).toBe(c.updatedAt + effectiveTimeoutSeconds(c) * 1000);
      c = refresh(c, c.openUntil!).circuit;
    }
    expect(seen).toEqual([60, 100, 100, 100]);
    expect(c.reopenCount).toBe(4);
  });

  it('resets on close', () => {
    let c = halfOpen({ backoff });
    c = recordOutcome(c, bad, c.halfOpenAt!).circuit;
    c = refresh(c, c.openUntil!).circuit;
    c = recordOutcome(c, ok, c.halfOpenAt!).circuit;
    expect(c.state).toBe('closed');
    expect(effectiveTimeoutSeconds(c)).toBe(30);
    expect(c.reopenCount).toBe(0);
  });

  it('without backoff re-opens for timeout_seconds, counting re-openings', () => {
    let c = halfOpen();
    c = recordOutcome(c, bad, c.halfOpenAt!).circuit;
    expect(effectiveTimeoutSeconds(c)).toBe(30);
    expect(c.reopenCount).toBe(1);
  });
});

describe('forced states', () => {
  const policy = (c: Circuit, forcedState: CircuitPolicy['forcedState']) => ({ ...policyOf(c), forcedState });

  it('forced open refuses calls on a closed circuit; the event keeps the state', () => {
    const c = newCircuit('svc', base, T0);
    const step = configure(c, policy(c, 'open'), T0);
    expect(step.transitions).toEqual([{ from: 'closed', to: 'closed', reason: 'forced_open', at: T0 }]);
    const verdict = admit(step.circuit, T0, lease).verdict;
    expect(verdict).toMatchObject({ allowed: false, forced: true });
  });

  it('forced closed admits calls on an open circuit and takes no probe slot', () => {
    let c = recordOutcome(newCircuit('svc', { ...base, failureThreshold: 1 }, T0), bad, T0).circuit;
    c = configure(c, policy(c, 'closed'), T0).circuit;
    expect(admit(c, T0, lease).verdict.allowed).toBe(true);
    const later = refresh(c, T0 + 30_000).circuit;
    expect(admit(admit(later, T0 + 30_000, lease).circuit, T0 + 30_000, lease).verdict.allowed).toBe(true);
  });

  it('forced closed still counts outcomes, and clearing applies the rules to them', () => {
    let c = newCircuit('svc', { ...base, failureThreshold: 2 }, T0);
    c = configure(c, policy(c, 'closed'), T0).circuit;
    c = feed(c, [bad, bad]);
    expect(c.state).toBe('open'); // the state without the force
    expect(admit(c, T0, lease).verdict.allowed).toBe(true);
    const cleared = configure(c, policy(c, null), T0);
    expect(cleared.transitions).toEqual([{ from: 'open', to: 'open', reason: 'force_cleared', at: T0 }]);
    expect(admit(cleared.circuit, T0, lease).verdict.allowed).toBe(false);
  });
});

describe('late outcomes and policy changes', () => {
  it('count_only: an outcome for an open circuit changes no state and no open time, but is counted', () => {
    const c = recordOutcome(newCircuit('svc', { ...base, failureThreshold: 1 }, T0), bad, T0).circuit;
    const afterSuccess = recordOutcome(c, ok, T0 + 1_000);
    expect(afterSuccess.circuit).toMatchObject({ state: 'open', openUntil: c.openUntil });
    expect(afterSuccess.transitions).toEqual([]);
    const afterFailure = recordOutcome(c, bad, T0 + 1_000).circuit;
    expect(afterFailure).toMatchObject({ state: 'open', openUntil: c.openUntil, failureCount: 2 });
  });

  it('circuitlog rule: a success closes an open circuit, a failure extends it', () => {
    const c = recordOutcome(newCircuit('svc', { ...base, failureThreshold: 1 }, T0), bad, T0).circuit;
    expect(recordOutcome(c, { success: true }, T0 + 1).circuit.state).toBe('closed');
    expect(recordOutcome(c, { success: false }, T0 + 1_000).circuit.openUntil).toBe(T0 + 31_000);
  });

  it('a changed window starts empty; other changes keep counts and state', () => {
    let c = feed(newCircuit('svc', { ...base, window: countWindow(10) }, T0), [bad, ok]);
    const threshold = configure(c, { ...policyOf(c), failureThreshold: 7 }, T0).circuit;
    expect(windowStats(threshold, T0)?.calls).toBe(2);
    expect(threshold.failureCount).toBe(0);
    c = configure(c, { ...policyOf(c), window: countWindow(20) }, T0).circuit;
    expect(windowStats(c, T0)?.calls).toBe(0);
  });

  it('an unchanged policy returns the very circuit (no write)', () => {
    const c = newCircuit('svc', base, T0);
    expect(configure(c, policyOf(c), T0).circuit).toBe(c);
  });
});

describe('clock stepping back', () => {
  it('never keeps a circuit open longer than its open time from now', () => {
    const c = recordOutcome(
      newCircuit('svc', { ...base, failureThreshold: 1, timeoutSeconds: 2 }, T0),
      bad,
      T0,
    ).circuit;
    const stepBack = T0 - 3_600_000;
    const refreshed = refresh(c, stepBack).circuit;
    expect(refreshed.openUntil).toBe(stepBack + 2_000);
    expect(admit(refreshed, stepBack, lease).verdict).toEqual({ allowed: false, retryAt: stepBack + 2_000 });
    expect(refresh(refreshed, stepBack + 2_000).circuit.state).toBe('half_open');
  });
});

describe('window figures equal a naive recount (property)', () => {
  const outcome = fc.record({
    success: fc.boolean(),
    durationMs: fc.option(fc.integer({ min: 0, max: 200 }), { nil: undefined }),
  });

  it('count window: the last size outcomes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 20 }), fc.array(outcome, { maxLength: 60 }), (size, outcomes) => {
        // Thresholds above 100 % never trip, so the window only ever grows and slides.
        const w = countWindow(size, { failureRateThreshold: 101, slowCallDurationMs: 100, slowCallRateThreshold: 101 });
        const c = feed(
          newCircuit('svc', { ...base, window: w }, T0),
          outcomes.map((o) => ({ ...o, late: 'count_only' as const })),
        );
        const last = outcomes.slice(-size);
        const failures = last.filter((o) => !o.success).length;
        const slow = last.filter((o) => o.durationMs !== undefined && o.durationMs >= 100).length;
        expect(windowStats(c, T0)).toMatchObject({ calls: last.length, failures, slowCalls: slow });
      }),
    );
  });

  it('time window: the outcomes of the last size seconds, at any later read', () => {
    const timed = fc.record({ o: outcome, gapMs: fc.integer({ min: 0, max: 3_000 }) });
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.array(timed, { maxLength: 60 }),
        fc.integer({ min: 0, max: 12_000 }),
        (size, seq, readAfter) => {
          const w = timeWindow(size, {
            failureRateThreshold: 101,
            slowCallDurationMs: 100,
            slowCallRateThreshold: 101,
          });
          let c = newCircuit('svc', { ...base, window: w }, T0);
          let now = T0;
          const at: number[] = [];
          for (const { o, gapMs } of seq) {
            now += gapMs;
            at.push(now);
            c = recordOutcome(c, { ...o, late: 'count_only' }, now).circuit;
          }
          const readAt = now + readAfter;
          const live = seq
            .filter((_, i) => Math.floor(at[i]! / 1000) > Math.floor(readAt / 1000) - size)
            .map((s) => s.o);
          const calls = live.length;
          const failures = live.filter((o) => !o.success).length;
          const slowCalls = live.filter((o) => o.durationMs !== undefined && o.durationMs >= 100).length;
          const rate = (n: number) => (calls === 0 ? 0 : Math.round((n / calls) * 10_000) / 100);
          expect(windowStats(c, readAt)).toEqual({
            calls,
            failures,
            slowCalls,
            failureRate: rate(failures),
            slowCallRate: rate(slowCalls),
          });
        },
      ),
    );
  });

  it('a count window opens exactly when the naive recount reaches the rate', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 100 }),
        fc.array(fc.boolean(), { maxLength: 40 }),
        (size, threshold, successes) => {
          let c = newCircuit('svc', { ...base, window: countWindow(size, { failureRateThreshold: threshold }) }, T0);
          const seen: boolean[] = [];
          for (const success of successes) {
            c = recordOutcome(c, { success, late: 'count_only' }, T0).circuit;
            seen.push(success);
            const last = seen.slice(-size);
            const trips = last.length >= size && last.filter((s) => !s).length * 100 >= threshold * last.length;
            expect(c.state).toBe(trips ? 'open' : 'closed');
            if (trips) return;
          }
        },
      ),
    );
  });
});
