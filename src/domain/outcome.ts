/**
 * Recording the outcome of a call: counted, judged against the thresholds and the window,
 * and ignored when stale (an outcome of an earlier state). Pure, as `circuit.ts`.
 */
import { nextOpenTimeoutSeconds } from './policy.js';
import {
  activeLeases,
  chain,
  closeCircuit,
  effectiveTimeoutSeconds,
  openCircuit,
  refresh,
  withoutTransition,
  assertNever,
} from './state-change.js';
import { throttleAfterOutcome } from './throttle-step.js';
import type { Circuit, EpochMs, FailureOptions, Outcome, Step, TripReason } from './types.js';
import { countCaller, judgeTrip, markForced } from './caller-steps.js';
import { addOutcome, isSlow, windowFigures, windowStartMs, windowTrip } from './window.js';

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
      // A named outcome is counted for its caller first (quorum, isolation: caller-steps.ts).
      return chain(countCaller(refreshed, outcome, now), (c) => byState(c, outcome, now));
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

/** The circuit with the outcome counted (failure count, window, and the throttle while closed), no state change. */
function counted(c: Circuit, outcome: Outcome, now: EpochMs, failureCount: number): Circuit {
  const windowState =
    c.window === null
      ? c.windowState
      : addOutcome(
          c.window,
          c.windowState,
          { failure: !outcome.success, slow: isSlow(c.window, outcome.durationMs) },
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

/** A trip rule fired: open, unless a quorum withholds it (caller-steps.ts). */
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
  if (probeSuccesses >= c.successThreshold) return closeCircuit(c, now, 'probe_succeeded');
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
