/**
 * The breaker state machine: pure functions `(circuit, now, ...) -> step`, one per event
 * (admit, an outcome in `outcome.ts`, reset, configure; the lazy refresh in `state-change.ts`).
 * Nothing here does I/O or reads a clock; every store wraps these in one atomic
 * read-modify-write. A function that changes nothing returns the circuit it was given
 * (same reference), which lets a store skip the write entirely.
 */
import { policyOf, resolvePolicy, samePolicy, sameWindow, type CircuitPolicy, type CircuitSettings } from './policy.js';
import {
  activeLeases,
  assertNever,
  closeCircuit,
  effectiveTimeoutSeconds,
  NO_TRANSITIONS,
  refresh,
  withoutTransition,
} from './state-change.js';
import type { Admission, BreakerPolicy, Circuit, EpochMs, Step, Verdict } from './types.js';
import { callersUnder } from './caller-state.js';
import { admitCaller, callerWouldRefuse, withoutQuorum } from './caller-steps.js';
import { sameThrottleWindow, type RandomSource } from './throttle.js';
import { admitThrottled } from './throttle-step.js';
import { windowFigures, type WindowFigures } from './window.js';

export type { CircuitPolicy, CircuitSettings } from './policy.js';
export type * from './types.js';
export { STALE_TOLERANCE_MS, isStale, recordFailure, recordOutcome, recordSuccess } from './outcome.js';
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
): Admission {
  // The hot path (a healthy dependency) allocates one small object and nothing else.
  if (
    circuit.state === 'closed' &&
    circuit.forcedState !== 'open' &&
    (caller === undefined || !circuit.callers?.length)
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
  if (own !== null)
    c = own.circuit; // an isolated caller's probe: judged by its slot, not throttled
  else if (c.state === 'closed' && c.throttle !== null) {
    const throttled = admitThrottled(c, now, random);
    return { circuit: throttled.circuit, transitions: refreshed.transitions, verdict: throttled.verdict };
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
    callers === 0
  ) {
    return withoutTransition(c);
  }
  // A reset also ends every caller's isolation: the operator says the dependency is fine.
  return closeCircuit(callers === 0 ? c : { ...c, callers: [] }, now, 'manual_reset');
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
    ...withoutQuorum(circuit),
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
