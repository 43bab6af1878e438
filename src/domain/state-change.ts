/**
 * The state changes every step of the breaker is built from: open, close, the lazy
 * open -> half-open refresh, and the plumbing that chains steps. Pure, as `circuit.ts`.
 */
import { markForced } from './caller-state.js';
import { endCoolDowns } from './outcome-rules.js';
import type { Circuit, EpochMs, Step, Transition, TransitionReason } from './types.js';

/** The empty transition list every unchanged step shares. */
export const NO_TRANSITIONS: readonly Transition[] = Object.freeze([]);

/** A step that changes no state. */
export function withoutTransition(circuit: Circuit): Step {
  return { circuit, transitions: NO_TRANSITIONS };
}

/** One step after another: the circuit after both, their transitions in order. */
export function chain(first: Step, next: (c: Circuit) => Step): Step {
  const second = next(first.circuit);
  if (first.transitions.length === 0) return second;
  return { circuit: second.circuit, transitions: [...first.transitions, ...second.transitions] };
}

/** The open time in force, in seconds: the one set at the last opening, else the base. */
export function effectiveTimeoutSeconds(c: Circuit): number {
  return c.openTimeoutSeconds ?? c.timeoutSeconds;
}

/**
 * The open -> half-open transition, due once `now >= openUntil` and stamped at `openUntil`
 * (when the open time ran out, however late it is written). A wall clock that stepped
 * back must not keep a circuit open longer than its open time from now, so an
 * `openUntil` beyond `now + open time` is pulled in to that.
 */
export function refresh(circuit: Circuit, now: EpochMs): Step {
  const opened = refreshOpen(circuit, now);
  // Cool-downs that ran out end here too, each stamped at its end (outcome-rules.ts).
  return circuit.coolDueAt == null ? opened : chain(opened, (c) => endCoolDowns(c, now));
}

function refreshOpen(circuit: Circuit, now: EpochMs): Step {
  if (circuit.state !== 'open' || circuit.openUntil === null) return withoutTransition(circuit);
  if (now < circuit.openUntil) {
    const latest = now + effectiveTimeoutSeconds(circuit) * 1000;
    if (circuit.openUntil <= latest) return withoutTransition(circuit);
    return withoutTransition({ ...circuit, openUntil: latest, updatedAt: now });
  }
  const at = circuit.openUntil;
  return markForced(circuit, {
    circuit: {
      ...circuit,
      state: 'half_open',
      halfOpenAt: at,
      probeLeases: [],
      probeSuccesses: 0,
      windowState: null,
      stateChangedAt: now,
      updatedAt: now,
    },
    transitions: [{ from: 'open', to: 'half_open', reason: 'open_timeout_elapsed', at }],
  });
}

/** Probe leases still held at `now`. */
export function activeLeases(circuit: Circuit, now: EpochMs): readonly EpochMs[] {
  return circuit.probeLeases.filter((expiresAt) => expiresAt > now);
}

/** The circuit opened for `seconds` (a re-opening from half-open keeps its count and half-open time). */
export function openCircuit(c: Circuit, now: EpochMs, reason: TransitionReason, seconds = c.timeoutSeconds): Step {
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

/**
 * What a closed circuit resets, written at `now`: every count back to 0, no open time, no
 * probes, an empty window and throttle. The one rule for closing (`closeCircuit`) and for a
 * trip the proxy's ejection cap withholds (`withholdTrip` in proxy/guard-rails.ts), which
 * keeps the state-change time: the state did not change.
 */
export function closedCircuit(c: Circuit, now: EpochMs): Circuit {
  return {
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
}

/** The circuit closed, every count back to 0; a transition unless it was closed already. */
export function closeCircuit(c: Circuit, now: EpochMs, reason: TransitionReason): Step {
  const closed = closedCircuit(c, now);
  if (c.state === 'closed') return withoutTransition(closed);
  return {
    circuit: { ...closed, stateChangedAt: now },
    transitions: [{ from: c.state, to: 'closed', reason, at: now }],
  };
}

/** For exhaustive switches. */
export function assertNever(value: never): never {
  throw new Error(`unexpected value ${JSON.stringify(value)}`);
}
