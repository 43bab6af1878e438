/**
 * The quorum and caller isolation as steps of the state machine (`circuit.ts` calls
 * these): counting a named outcome, deciding whether a trip opens the circuit or is
 * withheld, an isolated caller's admission, and the detect-only marking of events made
 * under a forced-closed circuit.
 */
import { callerAdmission, callerEntries, findCaller, recordCaller, takeCallerProbe } from './caller-state.js';
import { quorumCallers } from './quorum.js';
import { isSlow } from './window.js';
import type { Circuit, EpochMs, Outcome, Step, Transition, TripReason, Verdict } from './types.js';

const NONE: readonly Transition[] = Object.freeze([]);

/**
 * The circuit with a named outcome counted in its caller table, and the isolation events;
 * the same circuit (same reference) when it has no quorum, the outcome is anonymous, or
 * the caller has nothing to remember.
 */
export function countCaller(c: Circuit, outcome: Outcome, now: EpochMs): Step {
  const quorum = c.quorum ?? null;
  if (quorum === null || outcome.caller === undefined) return { circuit: c, transitions: NONE };
  const slow = c.window !== null && isSlow(c.window, outcome.durationMs);
  const step = recordCaller(
    c,
    quorum,
    { caller: outcome.caller, failure: !outcome.success, slow, late: outcome.late },
    now,
  );
  if (step.entries === callerEntries(c)) return { circuit: c, transitions: NONE };
  return { circuit: { ...c, callers: step.entries, updatedAt: now }, transitions: step.transitions };
}

/**
 * A trip rule fired on a closed circuit: without a quorum it opens (null). With one, it
 * opens only if at least `minCallers` named callers failed (or, for the slow-call rule,
 * were slow) within the window: then the callers that did (for the `open` event). Else
 * the trip is withheld: the circuit stays closed, its counts and window start again, and
 * a `trip_withheld` event names the callers that failed.
 */
export function judgeTrip(
  c: Circuit,
  reason: TripReason,
  now: EpochMs,
): { open: readonly string[] | null } | { withheld: Step } {
  const quorum = c.quorum ?? null;
  if (quorum === null) return { open: null };
  const callers = quorumCallers(
    callerEntries(c),
    reason === 'slow_call_rate_exceeded' ? 'slow' : 'failure',
    quorum,
    now,
  );
  if (callers.length >= quorum.minCallers) return { open: callers };
  const withheld: Transition = {
    from: 'closed',
    to: 'closed',
    reason: 'trip_withheld',
    at: now,
    rule: reason,
    callers,
  };
  return {
    withheld: { circuit: { ...c, failureCount: 0, windowState: null, updatedAt: now }, transitions: [withheld] },
  };
}

/**
 * An isolated caller's own say on a call the circuit allows: null when it has none (not
 * isolated, no quorum), else a refusal scoped to the caller, or the circuit with the
 * caller's probe slot taken.
 */
export function admitCaller(
  c: Circuit,
  caller: string | undefined,
  now: EpochMs,
  probeLeaseMs: number,
): { verdict: Verdict; circuit: Circuit } | null {
  if (caller === undefined || (c.quorum ?? null) === null) return null;
  const entries = callerEntries(c);
  const said = callerAdmission(findCaller(entries, caller), now);
  if (said === null) return null;
  if ('refuseUntil' in said)
    return { verdict: { allowed: false, retryAt: said.refuseUntil, scope: 'caller' }, circuit: c };
  return {
    verdict: { allowed: true },
    circuit: { ...c, callers: takeCallerProbe(entries, caller, now, probeLeaseMs), updatedAt: now },
  };
}

/** When the caller's own isolation would refuse it now (detect-only), or null. */
export function callerWouldRefuse(c: Circuit, caller: string | undefined, now: EpochMs): EpochMs | null {
  if (caller === undefined || (c.quorum ?? null) === null) return null;
  const said = callerAdmission(findCaller(callerEntries(c), caller), now);
  return said !== null && 'refuseUntil' in said ? said.refuseUntil : null;
}

/** The step with every event marked as made under a forced-closed circuit, when `before` was one. */
export function markForced<S extends Step>(before: Circuit, step: S): S {
  if (before.forcedState !== 'closed' || step.transitions.length === 0) return step;
  return {
    ...step,
    transitions: step.transitions.map((t) =>
      t.forcedState === 'closed' ? t : { ...t, forcedState: 'closed' as const },
    ),
  };
}

/** The circuit without its quorum and caller table (a policy without a quorum is being applied). */
export function withoutQuorum(c: Circuit): Circuit {
  if (c.quorum === undefined && c.callers === undefined) return c;
  const { quorum: _quorum, callers: _callers, ...rest } = c;
  return rest;
}
