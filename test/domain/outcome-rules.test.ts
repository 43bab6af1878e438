import { describe, expect, it } from 'vitest';
import {
  admit,
  newCircuit,
  recordOutcome,
  refresh,
  reset,
  type Circuit,
  type CircuitSettings,
  type Outcome,
} from '../../src/domain/circuit.js';
import { MAX_COOL_CALLERS } from '../../src/domain/outcome-rules.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';

// Issue 29 in the domain (src/domain/outcome-rules.ts): what each kind counts as, the cool-down
// a throttled outcome starts and ends, and the shared slow start. Times are a fake clock's.

const T0 = 1_000_000;
const POLICY = { probeLeaseMs: 10_000 };
const BASE: CircuitSettings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const KINDS = POLICY_DEFAULTS.kinds;

function circuit(settings: Partial<CircuitSettings> = {}): Circuit {
  return { ...newCircuit('svc', { ...BASE, ...settings }, T0), id: 1 };
}

/** Record each outcome one ms apart; the circuit after them and every transition. */
function run(c: Circuit, outcomes: readonly Outcome[], from = T0) {
  const transitions = [];
  let at = from;
  for (const o of outcomes) {
    const step = recordOutcome(c, o, at++);
    c = step.circuit;
    transitions.push(...step.transitions);
  }
  return { circuit: c, transitions };
}

const times = (n: number, o: Outcome): Outcome[] => Array.from({ length: n }, () => o);

describe('outcome kinds: what each counts as by default', () => {
  it('counts rejected as a success: it resets the consecutive failures and never opens', () => {
    const { circuit: c } = run(circuit(), [
      { success: false },
      { success: false },
      { success: false, kind: 'rejected' }, // the kind decides, whatever success says
      { success: false },
      { success: false },
    ]);
    expect(c).toMatchObject({ state: 'closed', failureCount: 2 });
  });

  it('ignores cancelled: the circuit is left as it was (same object, nothing to write)', () => {
    const c = run(circuit(), [{ success: false }]).circuit;
    expect(recordOutcome(c, { success: false, kind: 'cancelled' }, T0 + 5).circuit).toBe(c);
  });

  it('ignores a caller_deadline shorter than min_deadline_ms (five callers that gave it 50 ms open nothing)', () => {
    const { circuit: c } = run(circuit(), times(5, { success: false, kind: 'caller_deadline', deadlineMs: 50 }));
    expect(c).toMatchObject({ state: 'closed', failureCount: 0 });
  });

  it('counts a caller_deadline of at least min_deadline_ms as a failure: a hanging dependency still opens', () => {
    const fair = { success: true, kind: 'caller_deadline', deadlineMs: KINDS.minDeadlineMs! } as const;
    const { circuit: c, transitions } = run(circuit(), times(3, fair));
    expect(c.state).toBe('open');
    expect(transitions.map((t) => t.reason)).toEqual(['failure_threshold_reached']);
  });

  it('never counts a caller_deadline as a failure with min_deadline_ms null', () => {
    const c = circuit({ kinds: { ...KINDS, minDeadlineMs: null } });
    const { circuit: after } = run(c, times(5, { success: false, kind: 'caller_deadline', deadlineMs: 60_000 }));
    expect(after.state).toBe('closed');
  });

  it('counts a short-deadline caller_deadline that already ran past slow_call_duration_ms as a slow call', () => {
    const window = {
      type: 'count' as const,
      size: 4,
      minimumCalls: 4,
      failureRateThreshold: 50,
      slowCallDurationMs: 100,
      slowCallRateThreshold: 50,
    };
    const slow = { success: true, kind: 'caller_deadline', deadlineMs: 200, durationMs: 150 } as const;
    const quick = { success: true, kind: 'caller_deadline', deadlineMs: 50, durationMs: 50 } as const;
    const before = run(circuit({ window }), [slow, quick, { success: true }]).circuit;
    // The window counts the slow call and the success; its kinds note the ignored one too (4: caller_deadline).
    expect(before.windowState).toEqual({ type: 'count', outcomes: '20', failures: 0, slowCalls: 1, kinds: '440' });
    const { transitions } = run(before, [slow, slow], T0 + 10);
    expect(transitions.map((t) => t.reason)).toEqual(['slow_call_rate_exceeded']);
  });

  it('lets count_as override the table: rejected as failure opens the circuit', () => {
    const c = circuit({ kinds: { ...KINDS, countAs: { rejected: 'failure' } } });
    expect(run(c, times(3, { success: true, kind: 'rejected' })).circuit.state).toBe('open');
  });

  it('lets count_as replace the cool-down: throttled as ignore changes nothing', () => {
    const c = circuit({ kinds: { ...KINDS, countAs: { throttled: 'ignore' } } });
    expect(recordOutcome(c, { success: false, kind: 'throttled', retryAfterSeconds: 5 }, T0).circuit).toBe(c);
  });

  it('reads success: true|false without a kind as it always did', () => {
    expect(run(circuit(), times(3, { success: false })).circuit.state).toBe('open');
  });
});

describe('cool-downs (a throttled outcome)', () => {
  const throttled = (retryAfterSeconds?: number, caller?: string): Outcome => ({
    success: true,
    kind: 'throttled',
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    ...(caller === undefined ? {} : { caller }),
  });

  it('cools the whole circuit for the seconds asked: every call refused, failure count and state kept', () => {
    const failed = run(circuit(), [{ success: false }]).circuit;
    const step = recordOutcome(failed, throttled(3), T0 + 10);
    expect(step.circuit).toMatchObject({ state: 'closed', failureCount: 1, coolUntil: T0 + 3_010 });
    expect(step.transitions).toEqual([
      {
        from: 'closed',
        to: 'closed',
        reason: 'cool_down',
        at: T0 + 10,
        scope: 'circuit',
        until: T0 + 3_010,
        retryAfterSeconds: 3,
      },
    ]);
    expect(admit(step.circuit, T0 + 3_009, POLICY).verdict).toEqual({
      allowed: false,
      retryAt: T0 + 3_010,
      cooled: { scope: 'circuit' },
    });
  });

  it("uses the circuit's timeout_seconds when no Retry-After came, and caps at max_retry_after_seconds", () => {
    expect(recordOutcome(circuit(), throttled(), T0).circuit.coolUntil).toBe(T0 + 30_000);
    const capped = circuit({ kinds: { ...KINDS, maxRetryAfterSeconds: 60 } });
    expect(recordOutcome(capped, throttled(86_400), T0).circuit.coolUntil).toBe(T0 + 60_000);
  });

  it('extends a cool-down only when the new one asks for longer', () => {
    const cooled = recordOutcome(circuit(), throttled(10), T0).circuit;
    expect(recordOutcome(cooled, throttled(5), T0 + 1_000).circuit).toBe(cooled);
    const longer = recordOutcome(cooled, throttled(20), T0 + 1_000);
    expect(longer.circuit.coolUntil).toBe(T0 + 21_000);
    expect(longer.transitions.map((t) => t.reason)).toEqual(['cool_down']);
  });

  it('ends by itself at cool_until: cool_down_ended stamped at its end, the calls admitted again', () => {
    const cooled = recordOutcome(circuit(), throttled(3), T0).circuit;
    expect(refresh(cooled, T0 + 2_999).circuit).toBe(cooled);
    const ended = refresh(cooled, T0 + 4_500);
    expect(ended.transitions).toEqual([
      { from: 'closed', to: 'closed', reason: 'cool_down_ended', at: T0 + 3_000, scope: 'circuit' },
    ]);
    expect(ended.circuit.coolUntil).toBeUndefined();
    expect(ended.circuit.coolDueAt).toBeUndefined();
    expect(admit(cooled, T0 + 4_500, POLICY).verdict).toEqual({ allowed: true });
  });

  it('in caller scope cools only the named caller, and ends its cool-down at its own time', () => {
    const c = circuit({ kinds: { ...KINDS, throttleScope: 'caller' } });
    const step = recordOutcome(c, throttled(5, 'web-1'), T0);
    expect(step.transitions[0]).toMatchObject({ reason: 'cool_down', scope: 'caller', callers: ['web-1'] });
    expect(admit(step.circuit, T0 + 1, POLICY, 'web-1').verdict).toMatchObject({
      allowed: false,
      scope: 'caller',
      cooled: { scope: 'caller' },
    });
    expect(admit(step.circuit, T0 + 1, POLICY, 'web-2').verdict.allowed).toBe(true);
    expect(admit(step.circuit, T0 + 1, POLICY).verdict.allowed).toBe(true);
    expect(refresh(step.circuit, T0 + 5_000).transitions).toEqual([
      { from: 'closed', to: 'closed', reason: 'cool_down_ended', at: T0 + 5_000, scope: 'caller', callers: ['web-1'] },
    ]);
  });

  it('defaults to caller scope with a quorum and circuit scope without one', () => {
    const quorum = { minCallers: 2, windowSeconds: 60, maxCallers: 100 };
    const withQuorum = recordOutcome(circuit({ quorum }), throttled(5, 'web-1'), T0).circuit;
    expect(withQuorum.coolCallers).toEqual([['web-1', T0 + 5_000]]);
    expect(withQuorum.coolUntil).toBeUndefined();
    expect(recordOutcome(circuit(), throttled(5, 'web-1'), T0).circuit.coolUntil).toBe(T0 + 5_000);
  });

  it('keeps at most MAX_COOL_CALLERS caller-scope cool-downs, dropping the one ending soonest', () => {
    let c = circuit({ kinds: { ...KINDS, throttleScope: 'caller', maxRetryAfterSeconds: 86_400 } });
    for (let i = 0; i <= MAX_COOL_CALLERS; i++) c = recordOutcome(c, throttled(10 + i, `c${i}`), T0).circuit;
    expect(c.coolCallers).toHaveLength(MAX_COOL_CALLERS);
    expect(c.coolCallers!.some((e) => e[0] === 'c0')).toBe(false); // it ended soonest
    expect(c.coolCallers!.at(-1)).toEqual([`c${MAX_COOL_CALLERS}`, T0 + (10 + MAX_COOL_CALLERS) * 1000]);
    expect(c.coolDueAt).toBe(T0 + 11_000);
  });

  it('is ended by an operator reset', () => {
    const cooled = recordOutcome(circuit(), throttled(30), T0).circuit;
    expect(admit(cooled, T0 + 1, POLICY).verdict.allowed).toBe(false);
    const after = reset(cooled, T0 + 1).circuit;
    expect(after.coolUntil).toBeUndefined();
    expect(admit(after, T0 + 2, POLICY).verdict.allowed).toBe(true);
  });

  it('is not started while open (the outcome changes nothing)', () => {
    const open = run(circuit(), times(3, { success: false })).circuit;
    expect(recordOutcome(open, throttled(5), T0 + 10).circuit).toBe(open);
  });
});

describe('the shared slow start (ramp)', () => {
  const ramp = { seconds: 10, startPercent: 10 };

  /** A circuit with a ramp that opened at T0 and closed from half-open by one probe at T0 + 30 s. */
  function closedFromHalfOpen() {
    const open = run(circuit({ ramp }), times(3, { success: false })).circuit;
    const probe = admit(open, T0 + 30_002, POLICY).circuit;
    return recordOutcome(probe, { success: true }, T0 + 30_002);
  }

  it('starts when a circuit closes from half-open: ramp_until on the circuit and on the event', () => {
    const closed = closedFromHalfOpen();
    expect(closed.circuit).toMatchObject({ state: 'closed', rampUntil: T0 + 40_002 });
    expect(closed.transitions.at(-1)).toMatchObject({
      from: 'half_open',
      to: 'closed',
      reason: 'probe_succeeded',
      rampUntil: T0 + 40_002,
    });
  });

  it('admits a share growing linearly from start_percent to 100, decided by one draw', () => {
    const c = closedFromHalfOpen().circuit;
    const at = (ms: number, draw: number) =>
      admit(
        c,
        T0 + 30_002 + ms,
        POLICY,
        undefined,
        () => 0.5,
        () => draw,
      ).verdict;
    expect(at(0, 0.09)).toEqual({ allowed: true, rampPercent: 10 });
    expect(at(0, 0.1)).toEqual({ allowed: false, retryAt: T0 + 31_002, ramping: { percent: 10, until: T0 + 40_002 } });
    expect(at(5_000, 0.54)).toEqual({ allowed: true, rampPercent: 55 });
    expect(at(5_000, 0.56).allowed).toBe(false);
    expect(at(10_000, 0.999)).toEqual({ allowed: true });
  });

  it('starts when a circuit-wide cool-down ends, named on cool_down_ended', () => {
    const cooled = recordOutcome(circuit({ ramp }), { success: true, kind: 'throttled', retryAfterSeconds: 2 }, T0);
    expect(cooled.circuit.rampUntil).toBe(T0 + 12_000);
    const ended = refresh(cooled.circuit, T0 + 2_000);
    expect(ended.transitions).toEqual([
      {
        from: 'closed',
        to: 'closed',
        reason: 'cool_down_ended',
        at: T0 + 2_000,
        scope: 'circuit',
        rampUntil: T0 + 12_000,
      },
    ]);
    const verdict = admit(
      ended.circuit,
      T0 + 2_000,
      POLICY,
      undefined,
      () => 0.5,
      () => 0.5,
    ).verdict;
    expect(verdict).toMatchObject({ allowed: false, ramping: { percent: 10 } });
  });

  it('without a ramp policy closes as it always did', () => {
    const open = run(circuit(), times(3, { success: false })).circuit;
    const probe = admit(open, T0 + 30_002, POLICY).circuit;
    const closed = recordOutcome(probe, { success: true }, T0 + 30_002);
    expect(closed.circuit.rampUntil).toBeUndefined();
    expect(closed.transitions.at(-1)).not.toHaveProperty('rampUntil');
  });
});
