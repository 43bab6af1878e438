/**
 * The breaker state machine: pure functions `(circuit, event, now, policy) -> step`.
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
import { sameThrottleWindow, type RandomSource } from './throttle.js';
import { admitThrottled, throttleAfterOutcome } from './throttle-step.js';
import { addOutcome, isSlow, windowFigures, windowStartMs, windowTrip, type WindowFigures } from './window.js';
import type {
  Admission,
  BreakerEvent,
  BreakerPolicy,
  Circuit,
  EpochMs,
  FailureOptions,
  Outcome,
  Step,
  Transition,
  TransitionReason,
  Verdict,
} from './types.js';

export type { CircuitPolicy, CircuitSettings } from './policy.js';
export type * from './types.js';

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

const NO_TRANSITIONS: readonly Transition[] = Object.freeze([]);
const ALLOWED: Verdict = Object.freeze({ allowed: true });

function withoutTransition(circuit: Circuit): Step {
  return { circuit, transitions: NO_TRANSITIONS };
}

function chain(first: Step, next: (c: Circuit) => Step): Step {
  const second = next(first.circuit);
  if (first.transitions.length === 0) return second;
  return { circuit: second.circuit, transitions: [...first.transitions, ...second.transitions] };
}

/** The open time in force, in seconds: the one set at the last opening, else the base. */
export function effectiveTimeoutSeconds(c: Circuit): number {
  return c.openTimeoutSeconds ?? c.timeoutSeconds;
}

/** Dispatch one event to its step; `admit` answers an Admission. */
export function step(circuit: Circuit, event: BreakerEvent, now: EpochMs, policy: BreakerPolicy): Step | Admission {
  switch (event.type) {
    case 'refresh':
      return refresh(circuit, now);
    case 'admit':
      return admit(circuit, now, policy);
    case 'outcome':
      return recordOutcome(circuit, event, now);
    case 'reset':
      return reset(circuit, now);
    case 'configure':
      return configure(circuit, event.policy, now);
    default:
      return assertNever(event);
  }
}

/**
 * The open -> half-open transition, due once `now >= openUntil` and stamped at `openUntil`
 * (when the open time ran out, however late it is written). A wall clock that stepped
 * back must not keep a circuit open longer than its open time from now, so an
 * `openUntil` beyond `now + open time` is pulled in to that.
 */
export function refresh(circuit: Circuit, now: EpochMs): Step {
  if (circuit.state !== 'open' || circuit.openUntil === null) return withoutTransition(circuit);
  if (now < circuit.openUntil) {
    const latest = now + effectiveTimeoutSeconds(circuit) * 1000;
    if (circuit.openUntil <= latest) return withoutTransition(circuit);
    return withoutTransition({ ...circuit, openUntil: latest, updatedAt: now });
  }
  const at = circuit.openUntil;
  return {
    circuit: { ...circuit, state: 'half_open', halfOpenAt: at, probeLeases: [], probeSuccesses: 0, windowState: null, stateChangedAt: now, updatedAt: now },
    transitions: [{ from: 'open', to: 'half_open', reason: 'open_timeout_elapsed', at }],
  };
}

/** Probe leases still held at `now`. */
export function activeLeases(circuit: Circuit, now: EpochMs): readonly EpochMs[] {
  return circuit.probeLeases.filter((expiresAt) => expiresAt > now);
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
 * A forced state decides alone and takes no slot. A closed circuit with a throttle
 * refuses a share of calls (`throttle-step.ts`), drawing from `random` only when that
 * share is above 0.
 */
export function admit(circuit: Circuit, now: EpochMs, policy: BreakerPolicy, random: RandomSource = Math.random): Admission {
  // The hot path (a healthy dependency) allocates one small object and nothing else.
  if (circuit.forcedState === null ? circuit.state === 'closed' : circuit.forcedState === 'closed') {
    if (circuit.forcedState === null && circuit.throttle !== null) return admitThrottled(circuit, now, random);
    return { circuit, transitions: NO_TRANSITIONS, verdict: ALLOWED };
  }
  const refreshed = refresh(circuit, now);
  const c = refreshed.circuit;
  const verdict = isCallAllowed(c, now);
  if (!verdict.allowed || c.state !== 'half_open' || c.forcedState !== null) return { ...refreshed, verdict };
  const leases = [...activeLeases(c, now), now + policy.probeLeaseMs];
  return { circuit: { ...c, probeLeases: leases, updatedAt: now }, transitions: refreshed.transitions, verdict };
}

/**
 * Record the outcome of a call (after the due refresh). A stale outcome (see `isStale`)
 * changes nothing: it is evidence of an earlier state, already acted on.
 */
export function recordOutcome(circuit: Circuit, outcome: Outcome, now: EpochMs): Step {
  return chain(refresh(circuit, now), (c) => {
    if (outcome.at !== undefined && isStale(c, outcome.at, now)) return withoutTransition(c);
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
  });
}

/** The circuit with the outcome counted (failure count, window, and the throttle while closed), no state change. */
function counted(c: Circuit, outcome: Outcome, now: EpochMs, failureCount: number): Circuit {
  const windowState =
    c.window === null
      ? c.windowState
      : addOutcome(c.window, c.windowState, { failure: !outcome.success, slow: isSlow(c.window, outcome.durationMs) }, now);
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
  if (!outcome.success && next.failureCount >= c.failureThreshold) return open(next, now, 'failure_threshold_reached', seconds);
  if (c.window !== null) {
    const trip = windowTrip(c.window, windowFigures(c.window, next.windowState, now));
    if (trip !== null) return open(next, now, trip, seconds);
  }
  return withoutTransition(next);
}

function outcomeWhileHalfOpen(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  if (!outcome.success) {
    const reopened = { ...c, failureCount: c.failureCount + 1, lastFailureAt: now, reopenCount: c.reopenCount + 1 };
    const seconds = outcome.timeoutSeconds ?? nextOpenTimeoutSeconds(c, effectiveTimeoutSeconds(c));
    return open(reopened, now, 'probe_failed', seconds);
  }
  const probeSuccesses = c.probeSuccesses + 1;
  if (probeSuccesses >= c.successThreshold) return close(c, now, 'probe_succeeded');
  // This probe has reported: its slot (the oldest lease) is free for the next one.
  return withoutTransition({ ...c, probeSuccesses, probeLeases: activeLeases(c, now).slice(1), updatedAt: now });
}

function outcomeWhileOpen(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  if ((outcome.late ?? 'circuitlog') === 'count_only') {
    return withoutTransition(counted(c, outcome, now, outcome.success ? c.failureCount : c.failureCount + 1));
  }
  if (outcome.success) return close(c, now, 'success_recorded');
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

/** Operator reset: closed, count 0, window empty, whatever the state was. */
export function reset(circuit: Circuit, now: EpochMs): Step {
  const c = circuit;
  if (c.state === 'closed' && c.failureCount === 0 && c.probeLeases.length === 0 && c.windowState === null && c.throttleState === null) {
    return withoutTransition(c);
  }
  return close(c, now, 'manual_reset');
}

/**
 * Apply a new policy from the next call on: counts and state are kept, except that a
 * changed window starts empty, and so does the throttle when it is turned off or its
 * `windowSeconds` changes (a new `k` applies to the counts kept). Setting, changing or
 * clearing the force is an event.
 */
export function configure(circuit: Circuit, policy: CircuitPolicy, now: EpochMs): Step {
  if (samePolicy(policyOf(circuit), policy)) return withoutTransition(circuit);
  const next: Circuit = {
    ...circuit,
    ...policyOf(policy),
    windowState: sameWindow(circuit.window, policy.window) ? circuit.windowState : null,
    throttleState: sameThrottleWindow(circuit.throttle, policy.throttle) ? circuit.throttleState : null,
    updatedAt: now,
  };
  if (circuit.forcedState === policy.forcedState) return withoutTransition(next);
  const reason = policy.forcedState === 'open' ? 'forced_open' : policy.forcedState === 'closed' ? 'forced_closed' : 'force_cleared';
  return { circuit: next, transitions: [{ from: circuit.state, to: next.state, reason, at: now }] };
}

/** The window's live figures at `now`, or null without a window. */
export function windowStats(c: Circuit, now: EpochMs): WindowFigures | null {
  return c.window === null ? null : windowFigures(c.window, c.windowState, now);
}

function open(c: Circuit, now: EpochMs, reason: TransitionReason, seconds = c.timeoutSeconds): Step {
  const opened: Circuit = {
    ...c,
    state: 'open',
    openTimeoutSeconds: seconds,
    openUntil: now + seconds * 1000,
    reopenCount: c.state === 'half_open' ? c.reopenCount : 0,
    probeLeases: [],
    probeSuccesses: 0,
    windowState: null,
    throttleState: null,
    halfOpenAt: c.state === 'half_open' ? c.halfOpenAt : null,
    stateChangedAt: now,
    updatedAt: now,
  };
  return { circuit: opened, transitions: [{ from: c.state, to: 'open', reason, at: now }] };
}

function close(c: Circuit, now: EpochMs, reason: TransitionReason): Step {
  const closed: Circuit = {
    ...c,
    state: 'closed',
    failureCount: 0,
    openUntil: null,
    openTimeoutSeconds: null,
    reopenCount: 0,
    halfOpenAt: null,
    probeLeases: [],
    probeSuccesses: 0,
    windowState: null,
    throttleState: null,
    updatedAt: now,
  };
  if (c.state === 'closed') return withoutTransition(closed);
  return { circuit: { ...closed, stateChangedAt: now }, transitions: [{ from: c.state, to: 'closed', reason, at: now }] };
}

function assertNever(value: never): never {
  throw new Error(`unexpected value ${JSON.stringify(value)}`);
}
