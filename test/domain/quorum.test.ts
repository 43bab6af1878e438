import { describe, expect, it } from 'vitest';
import { callerEntries, findCaller, isolatedCallers } from '../../src/domain/caller-state.js';
import {
  admit,
  configure,
  newCircuit,
  recordOutcome,
  reset,
  type Circuit,
  type Outcome,
  type Transition,
} from '../../src/domain/circuit.js';
import { policyOf, type CircuitPolicy, type WindowPolicy } from '../../src/domain/policy.js';
import { quorumCallers, type QuorumPolicy } from '../../src/domain/quorum.js';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const lease = { probeLeaseMs: 10_000 };
const quorum: QuorumPolicy = { minCallers: 3, windowSeconds: 60, maxCallers: 1_000 };
const base = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1, quorum };
const countWindow = (size: number, failureRateThreshold = 50, extra: Partial<WindowPolicy> = {}): WindowPolicy => ({
  type: 'count',
  size,
  minimumCalls: null,
  failureRateThreshold,
  slowCallDurationMs: null,
  slowCallRateThreshold: 100,
  ...extra,
});

const fail = (caller?: string, extra: Partial<Outcome> = {}): Outcome => ({
  success: false,
  late: 'count_only',
  caller,
  ...extra,
});
const pass = (caller?: string, extra: Partial<Outcome> = {}): Outcome => ({
  success: true,
  late: 'count_only',
  caller,
  ...extra,
});

/** Feed outcomes (all at `now`); the circuit after them and every event on the way. */
function feed(c: Circuit, outcomes: readonly Outcome[], now = T0): { circuit: Circuit; events: Transition[] } {
  const events: Transition[] = [];
  for (const o of outcomes) {
    const step = recordOutcome(c, o, now);
    c = step.circuit;
    events.push(...step.transitions);
  }
  return { circuit: c, events };
}

const circuit = (extra: Partial<CircuitPolicy> = {}) => newCircuit('svc', { ...base, ...extra }, T0);

describe('quorum: a trip opens the circuit only on evidence from min_callers callers', () => {
  it('withholds a trip that fewer callers reported: closed, counts restart, the event names them', () => {
    const { circuit: c, events } = feed(circuit(), [fail('a'), fail('b'), fail('a')]);
    expect(c.state).toBe('closed');
    expect(c.failureCount).toBe(0);
    expect(events).toEqual([
      {
        from: 'closed',
        to: 'closed',
        reason: 'trip_withheld',
        at: T0,
        rule: 'failure_threshold_reached',
        callers: ['a', 'b'],
      },
    ]);
  });

  it('opens once min_callers distinct callers failed in the window, the opening naming them', () => {
    const { circuit: c, events } = feed(circuit(), [fail('a'), fail('b'), fail('c')]);
    expect(c.state).toBe('open');
    expect(events).toEqual([
      { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: T0, callers: ['a', 'b', 'c'] },
    ]);
  });

  it('counts a caller only while its last failure is within window_seconds', () => {
    let c = feed(circuit({ failureThreshold: 10 }), [fail('a'), fail('b')], T0).circuit;
    c = configure(c, { ...policyOf(c), failureThreshold: 3 }, T0).circuit;
    const later = T0 + 60_001;
    const { circuit: after, events } = feed(c, [fail('c')], later);
    expect(after.state).toBe('closed');
    expect(events.at(-1)).toMatchObject({ reason: 'trip_withheld', callers: ['c'] });
  });

  it('never counts anonymous outcomes toward the quorum, though they count toward the rules', () => {
    const { circuit: c, events } = feed(circuit(), [fail(), fail(), fail(), fail(), fail(), fail()]);
    expect(c.state).toBe('closed');
    expect(events.map((e) => e.reason)).toEqual(['trip_withheld', 'trip_withheld']);
    expect(events[0]!.callers).toEqual([]);
  });

  it('withholds a failure-rate trip the same way, restarting the window', () => {
    const c0 = circuit({ failureThreshold: 100, window: countWindow(4, 50) });
    const { circuit: c, events } = feed(c0, [pass('x'), fail('a'), pass('y'), fail('a')]);
    expect(c.state).toBe('closed');
    expect(c.windowState).toBeNull();
    expect(events).toMatchObject([{ reason: 'trip_withheld', rule: 'failure_rate_exceeded', callers: ['a'] }]);
  });

  it('judges the slow-call rule by the callers that were slow, not those that failed', () => {
    const c0 = circuit({
      failureThreshold: 100,
      window: countWindow(3, 100, { slowCallDurationMs: 1_000, slowCallRateThreshold: 60 }),
    });
    const slow = (caller: string): Outcome => pass(caller, { durationMs: 2_000 });
    const withheld = feed(c0, [fail('a'), slow('x'), slow('x')]);
    expect(withheld.events).toMatchObject([
      { reason: 'trip_withheld', rule: 'slow_call_rate_exceeded', callers: ['x'] },
    ]);
    const opened = feed(c0, [slow('x'), slow('y'), slow('z')]);
    expect(opened.events).toMatchObject([{ reason: 'slow_call_rate_exceeded', to: 'open', callers: ['x', 'y', 'z'] }]);
  });

  it('keeps no caller state at all without a quorum (today’s rules)', () => {
    const c = feed(newCircuit('svc', { ...base, quorum: null }, T0), [fail('a'), fail('a'), fail('a')]).circuit;
    expect(c.state).toBe('open');
    expect(callerEntries(c)).toEqual([]);
  });
});

describe('caller isolation', () => {
  const isolated = () =>
    feed(circuit({ failureThreshold: 3 }), [fail('bad'), pass('ok'), fail('bad'), pass('ok'), fail('bad')]);

  it('isolates a caller whose own consecutive failures reach failure_threshold, naming it', () => {
    const { circuit: c, events } = isolated();
    expect(c.state).toBe('closed');
    expect(events).toContainEqual({
      from: 'closed',
      to: 'closed',
      reason: 'caller_isolated',
      at: T0,
      callers: ['bad'],
      until: T0 + 30_000,
    });
    expect(isolatedCallers(callerEntries(c)).map((e) => e[0])).toEqual(['bad']);
  });

  it('refuses the isolated caller with scope caller and its own retry time, and allows every other caller', () => {
    const c = isolated().circuit;
    expect(admit(c, T0 + 1, lease, 'bad').verdict).toEqual({ allowed: false, retryAt: T0 + 30_000, scope: 'caller' });
    expect(admit(c, T0 + 1, lease, 'ok').verdict).toEqual({ allowed: true });
    expect(admit(c, T0 + 1, lease, 'never-seen').verdict).toEqual({ allowed: true });
    expect(admit(c, T0 + 1, lease).verdict).toEqual({ allowed: true });
  });

  it('gives one probe after timeout_seconds; a success ends the isolation with an event', () => {
    const c = isolated().circuit;
    const probe = admit(c, T0 + 30_000, lease, 'bad');
    expect(probe.verdict.allowed).toBe(true);
    expect(admit(probe.circuit, T0 + 30_001, lease, 'bad').verdict).toEqual({
      allowed: false,
      retryAt: T0 + 40_000,
      scope: 'caller',
    });
    const released = recordOutcome(probe.circuit, pass('bad'), T0 + 30_500);
    expect(released.transitions).toEqual([
      { from: 'closed', to: 'closed', reason: 'caller_released', at: T0 + 30_500, callers: ['bad'] },
    ]);
    expect(admit(released.circuit, T0 + 30_501, lease, 'bad').verdict).toEqual({ allowed: true });
  });

  it('isolates again after a failed probe, for the open time grown by the backoff', () => {
    const c = feed(circuit({ backoff: { multiplier: 2, maxTimeoutSeconds: 300 } }), [
      fail('bad'),
      fail('bad'),
      fail('bad'),
    ]).circuit;
    const probe = admit(c, T0 + 30_000, lease, 'bad').circuit;
    const again = recordOutcome(probe, fail('bad'), T0 + 30_000);
    expect(again.transitions).toMatchObject([
      { reason: 'caller_isolated', callers: ['bad'], until: T0 + 30_000 + 60_000 },
    ]);
    expect(admit(again.circuit, T0 + 89_999, lease, 'bad').verdict).toMatchObject({
      allowed: false,
      scope: 'caller',
      retryAt: T0 + 90_000,
    });
  });

  it('does not end an isolation on a late success of a call admitted before it', () => {
    const c = isolated().circuit;
    const late = recordOutcome(c, pass('bad'), T0 + 1_000);
    expect(late.transitions).toEqual([]);
    expect(admit(late.circuit, T0 + 1_000, lease, 'bad').verdict).toMatchObject({ allowed: false, scope: 'caller' });
  });

  it('ends every isolation on an operator reset', () => {
    const c = reset(isolated().circuit, T0 + 1).circuit;
    expect(admit(c, T0 + 2, lease, 'bad').verdict).toEqual({ allowed: true });
  });

  it('refuses everyone while the circuit is open, as today', () => {
    const c = feed(circuit(), [fail('a'), fail('b'), fail('c')]).circuit;
    expect(admit(c, T0 + 1, lease, 'd').verdict).toEqual({ allowed: false, retryAt: T0 + 30_000 });
  });
});

describe('caller table bound', () => {
  it('keeps at most max_callers callers, forgetting the least recently seen first', () => {
    const c0 = circuit({ failureThreshold: 1_000, quorum: { ...quorum, maxCallers: 3 } });
    const c = feed(c0, [fail('a'), fail('b'), fail('c'), fail('a'), fail('d')]).circuit;
    expect(callerEntries(c).map((e) => e[0])).toEqual(['c', 'a', 'd']);
  });

  it('holds a table stored under a larger max_callers (before the ceiling was lowered) to 1,000 callers', () => {
    const c0 = circuit({ failureThreshold: 100_000, quorum: { ...quorum, maxCallers: 100_000 } });
    const outcomes = Array.from({ length: 1_200 }, (_, i) => fail(`caller-${i}`));
    const c = feed(c0, outcomes).circuit;
    expect(callerEntries(c).length).toBe(1_000);
    expect(callerEntries(c)[0]![0]).toBe('caller-200');
  });

  it('writes nothing for a success of a caller it holds nothing for', () => {
    const c = circuit();
    expect(recordOutcome(c, pass('fresh'), T0).circuit).toBe(c);
  });

  it('drops the table when the quorum is removed, and cuts it to a smaller bound', () => {
    const c = feed(circuit({ failureThreshold: 1_000 }), [fail('a'), fail('b'), fail('c')]).circuit;
    expect(
      callerEntries(configure(c, { ...policyOf(c), quorum: { ...quorum, maxCallers: 2 } }, T0).circuit).map(
        (e) => e[0],
      ),
    ).toEqual(['b', 'c']);
    expect(callerEntries(configure(c, { ...policyOf(c), quorum: null }, T0).circuit)).toEqual([]);
  });

  it('forgets a caller with nothing left to count once its failures leave the window', () => {
    const c = feed(circuit({ failureThreshold: 1_000 }), [fail('a'), pass('a')]).circuit;
    expect(findCaller(callerEntries(c), 'a')).toBeDefined();
    const later = feed(c, [fail('b')], T0 + 61_000).circuit;
    expect(callerEntries(later).map((e) => e[0])).toEqual(['b']);
    expect(quorumCallers(callerEntries(later), 'failure', quorum, T0 + 61_000)).toEqual(['b']);
  });
});

describe('detect-only: forced closed runs the quorum and isolation without refusing', () => {
  const forced = (extra: Partial<CircuitPolicy> = {}) => {
    const c = circuit(extra);
    return configure(c, { ...policyOf(c), forcedState: 'closed' }, T0).circuit;
  };

  it('admits an isolated caller, saying it would be refused, and marks the event', () => {
    const { circuit: c, events } = feed(forced(), [fail('bad'), fail('bad'), fail('bad')]);
    expect(events.every((e) => e.forcedState === 'closed')).toBe(true);
    expect(events.map((e) => e.reason)).toEqual(['caller_isolated', 'trip_withheld']);
    expect(admit(c, T0 + 1, lease, 'bad').verdict).toEqual({
      allowed: true,
      wouldRefuse: { retryAt: T0 + 30_000, scope: 'caller', state: 'closed' },
    });
    expect(admit(c, T0 + 1, lease, 'ok').verdict).toEqual({ allowed: true });
  });

  it('admits everyone while the rules hold it open, saying each would be refused', () => {
    const { circuit: c, events } = feed(forced(), [fail('a'), fail('b'), fail('c')]);
    expect(events).toEqual([
      {
        from: 'closed',
        to: 'open',
        reason: 'failure_threshold_reached',
        at: T0,
        callers: ['a', 'b', 'c'],
        forcedState: 'closed',
      },
    ]);
    expect(admit(c, T0 + 1, lease, 'd').verdict).toEqual({
      allowed: true,
      wouldRefuse: { retryAt: T0 + 30_000, scope: 'circuit', state: 'open' },
    });
    const cleared = configure(c, { ...policyOf(c), forcedState: null }, T0 + 2).circuit;
    expect(admit(cleared, T0 + 2, lease, 'd').verdict).toEqual({ allowed: false, retryAt: T0 + 30_000 });
  });

  it('marks the open -> half-open transition made under the force', () => {
    const c = feed(forced(), [fail('a'), fail('b'), fail('c')]).circuit;
    const step = recordOutcome(c, pass('a'), T0 + 30_000);
    expect(step.transitions.map((t) => [t.reason, t.forcedState])).toEqual([
      ['open_timeout_elapsed', 'closed'],
      ['probe_succeeded', 'closed'],
    ]);
  });
});
