/**
 * Soft throttling: a closed circuit refuses a growing share of calls as its dependency's
 * success rate falls, before the breaker opens. The rule is the Google SRE book's
 * client-side ("adaptive") throttling (Site Reliability Engineering, 2016, ch. 21
 * "Handling Overload", https://sre.google/sre-book/handling-overload/): each call is
 * refused with probability
 *
 *     p = max(0, (requests - k * accepts) / (requests + 1))
 *
 * over the last `windowSeconds`, where, as in the book and in gRPC's implementation
 * (grpc-go `balancer/rls/internal/adaptive`, where requests = accepts + throttles):
 * - a *request* is a call the caller attempted: one whose outcome was reported (success
 *   or failure) or one this throttle refused (the refusal is counted when it is made);
 * - an *accept* is a request the dependency accepted: a reported success.
 * A call admitted but never reported is neither (it cannot raise p). Counting refusals
 * as requests is what makes p keep rising while the dependency keeps failing: the book's
 * "requests" are counted "on top of the adaptive throttling system".
 *
 * Pure functions over JSON-friendly state; the counts reuse the time window of
 * `window.ts` (per-second buckets: a request is a call, a request not accepted is a
 * "failure", so accepts = calls - failures).
 */
import { POLICY_DEFAULTS } from './policy-defaults.js';
import type { ThrottlePolicy, WindowPolicy } from './policy.js';
import { addOutcome, type WindowState } from './window.js';

export type { ThrottlePolicy } from './policy.js';

/**
 * k = 2 is the book's (and gRPC's) default. 60 s of history: the book keeps two minutes,
 * gRPC 30 s; a minute sits between them, so load falls within seconds of a failure burst
 * (p is judged from the first failures on) while a recovered dependency is fully trusted
 * again within a minute, and it keeps the stored counts at most 60 buckets. Kept in the
 * one defaults table, `policy-defaults.ts`.
 */
export const THROTTLE_DEFAULTS = POLICY_DEFAULTS.throttle;

/** Accepted ranges: k in [1, 100]; window 1 to 600 s (10 min: the stored buckets stay bounded). */
export const THROTTLE_LIMITS = Object.freeze({ minK: 1, maxK: 100, minWindowSeconds: 1, maxWindowSeconds: 600 });

/** A throttled call may try again after 1 s (`Retry-After: 1`): the next draw may admit it. */
export const THROTTLE_RETRY_AFTER_MS = 1_000;

/** Per-second request and accept counts; null when empty. A `time` window state of `window.ts`. */
export type ThrottleState = WindowState;

/** The counts the formula reads. */
export interface ThrottleCounts {
  readonly requests: number;
  readonly accepts: number;
}

/** What the throttle decided for one call. */
export interface ThrottleDecision {
  readonly throttled: boolean;
  /** The refusal probability the decision was drawn against (before this call was counted). */
  readonly probability: number;
}

/** A source of uniform numbers in [0, 1), as `Math.random`; tests inject their own. */
export type RandomSource = () => number;

/**
 * `random` drawn at most once: the same number however often it is asked. A store may run
 * a step more than once (an optimistic pass without the lock, a retry after a conflicting
 * write), and each run of one admission must see the same draw: drawing again would
 * refuse only when two draws both fall below p (p squared).
 */
export function drawOnce(random: RandomSource): RandomSource {
  let value: number | undefined;
  return () => (value ??= random());
}

const windowCache = new Map<number, WindowPolicy>();

/** The time window of `windowSeconds` the counts live in (built once per size). */
function countsWindow(windowSeconds: number): WindowPolicy {
  let window = windowCache.get(windowSeconds);
  if (window === undefined) {
    window = {
      type: 'time',
      size: windowSeconds,
      minimumCalls: null,
      failureRateThreshold: 100,
      slowCallDurationMs: null,
      slowCallRateThreshold: 100,
    };
    if (windowCache.size < 1_000) windowCache.set(windowSeconds, window); // sizes are bounded by THROTTLE_LIMITS anyway
  }
  return window;
}

/** The throttle settings completed with the defaults. */
export function resolveThrottle(settings: Partial<ThrottlePolicy>): ThrottlePolicy {
  return {
    k: settings.k ?? THROTTLE_DEFAULTS.k,
    windowSeconds: settings.windowSeconds ?? THROTTLE_DEFAULTS.windowSeconds,
  };
}

/** Whether counts kept under `a` still mean the same under `b`: both on, over the same seconds. */
export function sameThrottleWindow(a: ThrottlePolicy | null, b: ThrottlePolicy | null): boolean {
  return a !== null && b !== null && a.windowSeconds === b.windowSeconds;
}

const NO_COUNTS: ThrottleCounts = Object.freeze({ requests: 0, accepts: 0 });

/**
 * The requests and accepts of the window at `now`: buckets older than the window no longer
 * count (the current second and the `windowSeconds - 1` before it, as `window.ts` keeps
 * them). Summed here rather than through `windowFigures`, which also works out rates: this
 * runs on every admission of a throttled circuit.
 */
export function throttleCounts(policy: ThrottlePolicy, state: ThrottleState | null, now: number): ThrottleCounts {
  if (state === null || state.type !== 'time') return NO_COUNTS;
  const from = Math.floor(now / 1000) - policy.windowSeconds + 1;
  let requests = 0;
  let notAccepted = 0;
  for (const b of state.buckets) {
    if (b[0] < from) continue;
    requests += b[1];
    notAccepted += b[2];
  }
  return { requests, accepts: requests - notAccepted };
}

/** The book's formula: `max(0, (requests - k * accepts) / (requests + 1))`, in [0, 1). */
export function throttleProbability(k: number, counts: ThrottleCounts): number {
  return Math.max(0, (counts.requests - k * counts.accepts) / (counts.requests + 1));
}

/** The refusal probability a call would be drawn against at `now`. */
export function currentThrottleProbability(policy: ThrottlePolicy, state: ThrottleState | null, now: number): number {
  return throttleProbability(policy.k, throttleCounts(policy, state, now));
}

/**
 * The state with one more request at `now`: `accepted` for a reported success, not for a
 * reported failure or a refusal by the throttle.
 */
export function countRequest(
  policy: ThrottlePolicy,
  state: ThrottleState | null,
  accepted: boolean,
  now: number,
): ThrottleState {
  return addOutcome(countsWindow(policy.windowSeconds), state, { failure: !accepted, slow: false }, now);
}

/**
 * Refuse this call? Drawn against the probability at `now`: refused when `random() < p`.
 * `random` is called only when p > 0, so a healthy circuit costs no draw. The caller
 * counts a refusal (`countRequest(..., false, now)`); an admitted call is counted when
 * its outcome is reported.
 */
export function decideThrottle(
  policy: ThrottlePolicy,
  state: ThrottleState | null,
  now: number,
  random: RandomSource,
): ThrottleDecision {
  const probability = state === null ? 0 : currentThrottleProbability(policy, state, now);
  if (probability === 0) return NOT_THROTTLED; // a healthy circuit: no draw, no allocation
  return { throttled: random() < probability, probability };
}

const NOT_THROTTLED: ThrottleDecision = Object.freeze({ throttled: false, probability: 0 });
