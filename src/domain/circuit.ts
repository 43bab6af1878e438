/**
 * The breaker state machine: pure functions `(circuit, now, ...) -> step`, one per event
 * (admit, an outcome, reset, configure; the lazy refresh in `state-change.ts`).
 * Nothing here does I/O or reads a clock; every store wraps these in one atomic
 * read-modify-write. A function that changes nothing returns the circuit it was given
 * (same reference), which lets a store skip the write entirely.
 */
import {
  nextOpenTimeoutSeconds,
  policyOf,
  resolvePolicy,
  samePolicy,
  sameWindow,
  type CircuitPolicy,
  type CircuitSettings,
} from './policy.js';
import {
  activeLeases,
  assertNever,
  chain,
  closeCircuit,
  effectiveTimeoutSeconds,
  markForced,
  NO_TRANSITIONS,
  openCircuit,
  refresh,
  withoutTransition,
} from './state-change.js';
import type {
  Admission,
  BreakerPolicy,
  Circuit,
  EpochMs,
  FailureOptions,
  Outcome,
  Step,
  TripReason,
  Verdict,
} from './types.js';
import { admitCaller, callersUnder, callerWouldRefuse, countCaller, judgeTrip, withoutQuorum } from './caller-state.js';
import { sameThrottleWindow, type RandomSource } from './throttle.js';
import { admitThrottled, throttleAfterOutcome } from './throttle-step.js';
import {
  coolDown,
  coolVerdict,
  countedAs,
  mayCoolOrRamp,
  rampAfterClose,
  rampVerdict,
  withoutCoolingOrRamp,
} from './outcome-rules.js';
import {
  addOutcome,
  noteKind,
  isSlow,
  windowFigures,
  windowStartMs,
  windowTrip,
  type WindowFigures,
} from './window.js';

export type { CircuitPolicy, CircuitSettings } from './policy.js';
export type * from './types.js';
export { activeLeases, effectiveTimeoutSeconds, refresh } from './state-change.js';

const ALLOWED: Verdict = Object.freeze({ allowed: true });

export function newCircuit(name: string, settings: CircuitSettings, now: EpochMs): Circuit {
  return {
    id: 0,
    name,
    ...resolvePolicy(settings),
    state: 'closed',
    failureCount: 0,
    probeLeases: [],
    probeSuccesses: 0,
    openUntil: null,
    openTimeoutSeconds: null,
    reopenCount: 0,
    windowState: null,
    throttleState: null,
    halfOpenAt: null,
    lastFailureAt: null,
    stateChangedAt: null, // closed since creation: no change yet that would make an outcome stale
    createdAt: now,
    updatedAt: now,
  };
}

/** Read-only: may a call go ahead now? Expects a refreshed circuit. */
export function isCallAllowed(circuit: Circuit, now: EpochMs): Verdict {
  if (circuit.forcedState === 'closed') return ALLOWED;
  if (circuit.forcedState === 'open') {
    // No end is known; the open time in force is the hint a refused caller gets.
    return { allowed: false, retryAt: now + effectiveTimeoutSeconds(circuit) * 1000, forced: true };
  }
  switch (circuit.state) {
    case 'closed':
      return ALLOWED;
    case 'open':
      return { allowed: false, retryAt: circuit.openUntil ?? now };
    case 'half_open': {
      const leases = activeLeases(circuit, now);
      if (leases.length < circuit.halfOpenMaxCalls) return ALLOWED;
      return { allowed: false, retryAt: Math.min(...leases) };
    }
    default:
      return assertNever(circuit.state);
  }
}

/**
 * Refresh, then decide; an admitted half-open call takes a probe slot until its outcome
 * is recorded or its lease runs out, so at most `halfOpenMaxCalls` probes are in flight.
 * A named caller that is isolated is refused (scope `caller`) or gets its own probe.
 * A forced state decides alone and takes no slot; forced closed says what the rules would do.
 * A closed circuit with a throttle refuses a share of the other calls (`throttle-step.ts`),
 * drawing from `random` only when that share is above 0.
 */
export function admit(
  circuit: Circuit,
  now: EpochMs,
  policy: BreakerPolicy,
  caller?: string,
  random: RandomSource = Math.random,
  rampRandom: RandomSource = random,
): Admission {
  // The hot path (a healthy dependency) allocates one small object and nothing else.
  if (
    circuit.state === 'closed' &&
    circuit.forcedState !== 'open' &&
    (caller === undefined || !circuit.callers?.length) &&
    (circuit.forcedState === 'closed' || !mayCoolOrRamp(circuit, now))
  ) {
    if (circuit.forcedState === null && circuit.throttle !== null) return admitThrottled(circuit, now, random);
    return { circuit, transitions: NO_TRANSITIONS, verdict: ALLOWED };
  }
  if (circuit.forcedState === 'closed')
    return { circuit, transitions: NO_TRANSITIONS, verdict: detectOnly(circuit, now, caller) };
  const refreshed = refresh(circuit, now);
  let c = refreshed.circuit;
  const verdict = isCallAllowed(c, now);
  if (!verdict.allowed || c.forcedState !== null) return { ...refreshed, verdict };
  const own = admitCaller(c, caller, now, policy.probeLeaseMs);
  if (own !== null && !own.verdict.allowed) return { ...refreshed, verdict: own.verdict };
  // A cool-down (issue 29) refuses every call it applies to, a caller's probe too.
  const cooled = c.state === 'closed' ? coolVerdict(c, caller, now) : null;
  if (cooled !== null) return { ...refreshed, verdict: cooled };
  if (own !== null)
    c = own.circuit; // an isolated caller's probe: judged by its slot, not throttled or ramped
  else if (c.state === 'closed') {
    const ramped = rampVerdict(c, now, rampRandom);
    if (ramped !== null && !ramped.allowed) return { ...refreshed, verdict: ramped };
    if (c.throttle === null) return { circuit: c, transitions: refreshed.transitions, verdict: ramped ?? verdict };
    const throttled = admitThrottled(c, now, random);
    const v = ramped !== null && throttled.verdict.allowed ? ramped : throttled.verdict;
    return { circuit: throttled.circuit, transitions: refreshed.transitions, verdict: v };
  }
  if (c.state !== 'half_open') return { circuit: c, transitions: refreshed.transitions, verdict };
  const leases = [...activeLeases(c, now), now + policy.probeLeaseMs];
  return { circuit: { ...c, probeLeases: leases, updatedAt: now }, transitions: refreshed.transitions, verdict };
}

/**
 * A forced-closed circuit admits every call; the verdict says when the rules (the circuit's
 * state as of now, or the caller's isolation) would have refused it. Nothing is written.
 */
function detectOnly(circuit: Circuit, now: EpochMs, caller: string | undefined): Verdict {
  const c = refresh(circuit, now).circuit;
  const rules = isCallAllowed({ ...c, forcedState: null }, now);
  if (!rules.allowed)
    return { allowed: true, wouldRefuse: { retryAt: rules.retryAt, scope: 'circuit', state: c.state } };
  const until = c.state === 'closed' ? callerWouldRefuse(c, caller, now) : null;
  return until === null ? ALLOWED : { allowed: true, wouldRefuse: { retryAt: until, scope: 'caller', state: c.state } };
}

/** Operator reset: closed, count 0, window empty, whatever the state was. */
export function reset(circuit: Circuit, now: EpochMs): Step {
  const c = circuit;
  const callers = c.callers?.length ?? 0;
  if (
    c.state === 'closed' &&
    c.failureCount === 0 &&
    c.probeLeases.length === 0 &&
    c.windowState === null &&
    c.throttleState === null &&
    callers === 0 &&
    c.coolDueAt == null &&
    c.rampUntil == null
  ) {
    return withoutTransition(c);
  }
  // A reset also ends every caller's isolation, every cool-down and the ramp: the operator says the dependency is fine.
  const cleared = withoutCoolingOrRamp(c);
  const step = closeCircuit(callers === 0 ? cleared : { ...cleared, callers: [] }, now, 'manual_reset');
  // Closed already, no state changes; ending a cool-down or a ramp in force is still an event (closed -> closed),
  // or the clients, which refuse and ramp from their view, would go on until its end.
  if (step.transitions.length > 0 || (c.coolDueAt == null && !(c.rampUntil != null && now < c.rampUntil))) return step;
  return { ...step, transitions: [{ from: c.state, to: c.state, reason: 'manual_reset', at: now }] };
}

/**
 * Apply a new policy from the next call on: counts and state are kept, except that a
 * changed window starts empty, and so does the throttle when it is turned off or its
 * `windowSeconds` changes (a new `k` applies to the counts kept). Setting, changing or
 * clearing the force is an event.
 */
export function configure(circuit: Circuit, policy: CircuitPolicy, now: EpochMs): Step {
  if (samePolicy(policyOf(circuit), policy)) return withoutTransition(circuit);
  // `kinds`, `ramp` and `history` are left out of a policy that has none: drop the old ones, or they would stay.
  const { kinds: _kinds, ramp: _ramp, history: _history, ...kept } = withoutQuorum(circuit);
  const next: Circuit = {
    ...kept,
    ...policyOf(policy),
    windowState: sameWindow(circuit.window, policy.window) ? circuit.windowState : null,
    throttleState: sameThrottleWindow(circuit.throttle, policy.throttle) ? circuit.throttleState : null,
    ...(circuit.callers === undefined || policy.quorum == null
      ? {}
      : { callers: callersUnder(circuit.callers, policy.quorum) }),
    updatedAt: now,
  };
  if (circuit.forcedState === policy.forcedState) return withoutTransition(next);
  const reason =
    policy.forcedState === 'open' ? 'forced_open' : policy.forcedState === 'closed' ? 'forced_closed' : 'force_cleared';
  return { circuit: next, transitions: [{ from: circuit.state, to: next.state, reason, at: now }] };
}

/** The window's live figures at `now`, or null without a window. */
export function windowStats(c: Circuit, now: EpochMs): WindowFigures | null {
  return c.window === null ? null : windowFigures(c.window, c.windowState, now);
}

// Recording the outcome of a call: counted, judged against the thresholds and the window,
// and ignored when stale (an outcome of an earlier state).

/**
 * How far before the circuit's last state change an outcome's `at` may lie and still be
 * judged: hosts' clocks differ by a little (NTP keeps them within milliseconds), and a
 * probe admitted just after a change must count even from a host whose clock is behind.
 */
export const STALE_TOLERANCE_MS = 1_000; // 1 s

/**
 * Is an outcome of a call that ended at `at` stale? Yes when it ended before the circuit's
 * last state change (so it cannot be the answer to this state: a queued outcome replayed
 * after a restart, say), or before the time window still counts.
 */
export function isStale(c: Circuit, at: EpochMs, now: EpochMs): boolean {
  const changedAt = c.stateChangedAt ?? null;
  if (changedAt !== null && at < changedAt - STALE_TOLERANCE_MS) return true;
  const windowStart = c.window === null ? null : windowStartMs(c.window, now);
  return windowStart !== null && at < windowStart;
}

/**
 * Record the outcome of a call (after the due refresh). A stale outcome (see `isStale`)
 * changes nothing: it is evidence of an earlier state, already acted on.
 */
export function recordOutcome(circuit: Circuit, outcome: Outcome, now: EpochMs): Step {
  return markForced(
    circuit,
    chain(refresh(circuit, now), (refreshed) => {
      if (outcome.at !== undefined && isStale(refreshed, outcome.at, now)) return withoutTransition(refreshed);
      // Every rule below sees the outcome as what its kind counts as (outcome-rules.ts).
      const as = countedAs(refreshed, outcome);
      if (as === 'ignore' || as === 'cool') {
        // Counted as nothing by the rules; the window notes its kind (window_stats.kinds).
        const noted = withKindNoted(refreshed, outcome, now);
        if (as === 'ignore' || noted.state !== 'closed') return withoutTransition(noted);
        return coolDown(noted, outcome, now);
      }
      const o = outcome.success === (as === 'success') ? outcome : { ...outcome, success: as === 'success' };
      // A named outcome is counted for its caller first (quorum, isolation: caller-state.ts).
      return chain(countCaller(refreshed, o, now), (c) => byState(c, o, now));
    }),
  );
}

function byState(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  switch (c.state) {
    case 'closed':
      return outcomeWhileClosed(c, outcome, now);
    case 'half_open':
      return outcomeWhileHalfOpen(c, outcome, now);
    case 'open':
      return outcomeWhileOpen(c, outcome, now);
    default:
      return assertNever(c.state);
  }
}

/** The circuit with an outcome the rules do not count noted among its window's kinds (window.ts); as given without a window. */
function withKindNoted(c: Circuit, outcome: Outcome, now: EpochMs): Circuit {
  if (c.window === null || outcome.kind === undefined) return c;
  return { ...c, windowState: noteKind(c.window, c.windowState, outcome.kind, now), updatedAt: now };
}

/** The circuit with the outcome counted (failure count, window, and the throttle while closed), no state change. */
function counted(c: Circuit, outcome: Outcome, now: EpochMs, failureCount: number): Circuit {
  const windowState =
    c.window === null
      ? c.windowState
      : addOutcome(
          c.window,
          c.windowState,
          {
            failure: !outcome.success,
            slow: isSlow(c.window, outcome.durationMs),
            ...(outcome.kind === undefined ? {} : { kind: outcome.kind }),
          },
          now,
        );
  return {
    ...c,
    failureCount,
    windowState,
    throttleState: c.state === 'closed' ? throttleAfterOutcome(c, outcome.success, now) : c.throttleState,
    lastFailureAt: outcome.success ? c.lastFailureAt : now,
    updatedAt: now,
  };
}

function outcomeWhileClosed(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  // A success on a healthy circuit without a window or throttle changes nothing: no write at all.
  if (outcome.success && c.failureCount === 0 && c.window === null && c.throttle === null) return withoutTransition(c);
  const next = counted(c, outcome, now, outcome.success ? 0 : c.failureCount + 1);
  // circuitlog's per-failure open time applies to the opening this failure causes, and only to it.
  const seconds = outcome.timeoutSeconds ?? c.timeoutSeconds;
  if (!outcome.success && next.failureCount >= c.failureThreshold)
    return trip(next, now, 'failure_threshold_reached', seconds);
  if (c.window !== null) {
    const reason = windowTrip(c.window, windowFigures(c.window, next.windowState, now));
    if (reason !== null) return trip(next, now, reason, seconds);
  }
  return withoutTransition(next);
}

/** A trip rule fired: open, unless a quorum withholds it (caller-state.ts). */
function trip(c: Circuit, now: EpochMs, reason: TripReason, seconds: number): Step {
  const judged = judgeTrip(c, reason, now);
  if ('withheld' in judged) return judged.withheld;
  const opened = openCircuit(c, now, reason, seconds);
  if (judged.open === null) return opened;
  return { circuit: opened.circuit, transitions: [{ ...opened.transitions[0]!, callers: judged.open }] };
}

function outcomeWhileHalfOpen(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  if (!outcome.success) {
    const reopened = { ...c, failureCount: c.failureCount + 1, lastFailureAt: now, reopenCount: c.reopenCount + 1 };
    const seconds = outcome.timeoutSeconds ?? nextOpenTimeoutSeconds(c, effectiveTimeoutSeconds(c));
    return openCircuit(reopened, now, 'probe_failed', seconds);
  }
  const probeSuccesses = c.probeSuccesses + 1;
  if (probeSuccesses >= c.successThreshold) return rampAfterClose(closeCircuit(c, now, 'probe_succeeded'), now);
  // This probe has reported: its slot (the oldest lease) is free for the next one.
  return withoutTransition({ ...c, probeSuccesses, probeLeases: activeLeases(c, now).slice(1), updatedAt: now });
}

function outcomeWhileOpen(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  if ((outcome.late ?? 'circuitlog') === 'count_only') {
    return withoutTransition(counted(c, outcome, now, outcome.success ? c.failureCount : c.failureCount + 1));
  }
  if (outcome.success) return closeCircuit(c, now, 'success_recorded');
  // circuitlog: a failure reported while open starts the open time again.
  const seconds = outcome.timeoutSeconds ?? effectiveTimeoutSeconds(c);
  return withoutTransition({
    ...c,
    failureCount: c.failureCount + 1,
    openTimeoutSeconds: seconds,
    openUntil: now + seconds * 1000,
    lastFailureAt: now,
    updatedAt: now,
  });
}

/** Count a failure under circuitlog's rules. */
export function recordFailure(circuit: Circuit, now: EpochMs, options: FailureOptions = {}): Step {
  return recordOutcome(circuit, { success: false, timeoutSeconds: options.timeoutSeconds }, now);
}

/** Count a success under circuitlog's rules. */
export function recordSuccess(circuit: Circuit, now: EpochMs): Step {
  return recordOutcome(circuit, { success: true }, now);
}
