import { describe, expect, it } from 'vitest';
import {
  THROTTLE_DEFAULTS,
  countRequest,
  currentThrottleProbability,
  decideThrottle,
  resolveThrottle,
  throttleCounts,
  throttleProbability,
  type ThrottlePolicy,
  type ThrottleState,
} from '../../src/domain/throttle.js';
import { sameThrottle } from '../../src/domain/policy.js';

const T0 = Date.parse('2026-11-30T00:00:00.000Z');
const policy: ThrottlePolicy = { k: 2, windowSeconds: 60 };

/** `n` requests at `now`, the first `accepted` of them accepted. */
function count(state: ThrottleState | null, n: number, accepted: number, now = T0, p = policy): ThrottleState | null {
  for (let i = 0; i < n; i++) state = countRequest(p, state, i < accepted, now);
  return state;
}

/** A random source that answers `values` in turn and counts its draws. */
function scripted(...values: number[]) {
  const source = Object.assign(
    () => {
      source.draws++;
      return values.shift() ?? 0.5;
    },
    { draws: 0 },
  );
  return source;
}

describe('soft throttling (SRE client-side throttling)', () => {
  it('defaults to k 2 over 60 s', () => {
    expect(THROTTLE_DEFAULTS).toEqual({ k: 2, windowSeconds: 60 });
    expect(resolveThrottle({})).toEqual({ k: 2, windowSeconds: 60 });
    expect(resolveThrottle({ k: 1.5 })).toEqual({ k: 1.5, windowSeconds: 60 });
  });

  it('computes max(0, (requests - k * accepts) / (requests + 1))', () => {
    expect(throttleProbability(2, { requests: 10, accepts: 3 })).toBe(4 / 11);
    expect(throttleProbability(2, { requests: 10, accepts: 5 })).toBe(0);
    expect(throttleProbability(2, { requests: 10, accepts: 9 })).toBe(0);
    expect(throttleProbability(1.5, { requests: 100, accepts: 0 })).toBe(100 / 101);
  });

  it('counts reported successes as accepted requests and failures as requests only', () => {
    const state = count(null, 10, 3);
    expect(throttleCounts(policy, state, T0)).toEqual({ requests: 10, accepts: 3 });
    expect(currentThrottleProbability(policy, state, T0)).toBe(4 / 11);
  });

  it('never throttles without history and draws no number', () => {
    const random = scripted(0);
    expect(decideThrottle(policy, null, T0, random)).toEqual({ throttled: false, probability: 0 });
    expect(random.draws).toBe(0);
  });

  it('never throttles a dependency that accepts every call, and draws no number', () => {
    const random = scripted(0);
    const state = count(null, 1_000, 1_000);
    expect(decideThrottle(policy, state, T0, random)).toEqual({ throttled: false, probability: 0 });
    expect(decideThrottle({ k: 1, windowSeconds: 60 }, state, T0, random).throttled).toBe(false);
    expect(random.draws).toBe(0);
  });

  it('refuses when the draw is below the probability and admits at or above it', () => {
    const state = count(null, 10, 3); // p = 4/11
    const p = 4 / 11;
    expect(decideThrottle(policy, state, T0, scripted(p - 1e-9))).toEqual({ throttled: true, probability: p });
    expect(decideThrottle(policy, state, T0, scripted(p))).toEqual({ throttled: false, probability: p });
    expect(decideThrottle(policy, state, T0, scripted(0.99))).toEqual({ throttled: false, probability: p });
  });

  it('counts a refusal as a request the dependency did not accept, so p keeps rising', () => {
    const state = count(null, 10, 3);
    const refused = countRequest(policy, state, false, T0);
    expect(throttleCounts(policy, refused, T0)).toEqual({ requests: 11, accepts: 3 });
    expect(currentThrottleProbability(policy, refused, T0)).toBe(5 / 12);
  });

  it('a larger k throttles less: requests may reach k times the accepts first', () => {
    const state = count(null, 10, 4);
    expect(currentThrottleProbability({ k: 2, windowSeconds: 60 }, state, T0)).toBe(2 / 11);
    expect(currentThrottleProbability({ k: 2.5, windowSeconds: 60 }, state, T0)).toBe(0);
  });

  it('holds the current second and the window_seconds - 1 before it', () => {
    const p: ThrottlePolicy = { k: 2, windowSeconds: 10 };
    const state = count(null, 5, 0, T0, p);
    expect(throttleCounts(p, state, T0 + 9_999)).toEqual({ requests: 5, accepts: 0 });
    expect(throttleCounts(p, state, T0 + 10_000)).toEqual({ requests: 0, accepts: 0 });
    expect(currentThrottleProbability(p, state, T0 + 10_000)).toBe(0);
  });

  it('drops expired seconds when counting a new request', () => {
    const p: ThrottlePolicy = { k: 2, windowSeconds: 2 };
    let state = count(null, 4, 0, T0, p);
    state = count(state, 1, 1, T0 + 1_000, p);
    state = count(state, 1, 1, T0 + 2_000, p);
    expect(throttleCounts(p, state, T0 + 2_000)).toEqual({ requests: 2, accepts: 2 });
    expect(state).toEqual({
      type: 'time',
      buckets: [
        [T0 / 1000 + 1, 1, 0, 0],
        [T0 / 1000 + 2, 1, 0, 0],
      ],
    });
  });

  it('counts a request from a clock that stepped back in the newest second', () => {
    const state = count(count(null, 2, 0, T0 + 5_000), 1, 1, T0);
    expect(state).toEqual({ type: 'time', buckets: [[T0 / 1000 + 5, 3, 2, 0]] });
    expect(throttleCounts(policy, state, T0 + 5_000)).toEqual({ requests: 3, accepts: 1 });
  });

  it('compares policies field by field', () => {
    expect(sameThrottle(null, null)).toBe(true);
    expect(sameThrottle(policy, null)).toBe(false);
    expect(sameThrottle(policy, { k: 2, windowSeconds: 60 })).toBe(true);
    expect(sameThrottle(policy, { k: 3, windowSeconds: 60 })).toBe(false);
    expect(sameThrottle(policy, { k: 2, windowSeconds: 30 })).toBe(false);
  });
});
