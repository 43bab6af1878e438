/**
 * Soft throttling as steps of the breaker: the throttle decides admissions while the
 * circuit is closed and counts what the circuit sees then (`throttle.ts` has the rule).
 * Its counts start empty at every state change, as the window's do.
 */
import { THROTTLE_RETRY_AFTER_MS, countRequest, decideThrottle, type RandomSource } from './throttle.js';
import type { Admission, Circuit, EpochMs, Transition, Verdict } from './types.js';

const NO_TRANSITIONS: readonly Transition[] = Object.freeze([]);
const ALLOWED: Verdict = Object.freeze({ allowed: true });

/**
 * Admit a call on a closed, unforced circuit that has a throttle: refused with the
 * probability of `throttle.ts`, the refusal counted as a request not accepted (a write);
 * an admitted call changes nothing (its outcome is counted when reported).
 */
export function admitThrottled(c: Circuit, now: EpochMs, random: RandomSource): Admission {
  const decision = c.throttle === null ? null : decideThrottle(c.throttle, c.throttleState, now, random);
  if (decision === null || !decision.throttled) return { circuit: c, transitions: NO_TRANSITIONS, verdict: ALLOWED };
  const throttleState = countRequest(c.throttle!, c.throttleState, false, now);
  return {
    circuit: { ...c, throttleState, updatedAt: now },
    transitions: NO_TRANSITIONS,
    verdict: {
      allowed: false,
      retryAt: now + THROTTLE_RETRY_AFTER_MS,
      throttled: { probability: decision.probability },
    },
  };
}

/** The throttle's counts after an outcome reported while closed: a request, accepted when a success. */
export function throttleAfterOutcome(c: Circuit, success: boolean, now: EpochMs): Circuit['throttleState'] {
  return c.throttle === null ? c.throttleState : countRequest(c.throttle, c.throttleState, success, now);
}
