import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  THROTTLE_LIMITS,
  countRequest,
  currentThrottleProbability,
  decideThrottle,
  throttleCounts,
  type ThrottlePolicy,
  type ThrottleState,
} from '../../src/domain/throttle.js';

const T0 = Date.parse('2026-11-30T00:00:00.000Z');

type Kind = 'success' | 'failure' | 'refused';
interface Event {
  readonly afterMs: number;
  readonly kind: Kind;
}

const policyArb = fc.record({
  k: fc.double({ min: THROTTLE_LIMITS.minK, max: 10, noNaN: true }),
  windowSeconds: fc.integer({ min: THROTTLE_LIMITS.minWindowSeconds, max: THROTTLE_LIMITS.maxWindowSeconds }),
});
const eventArb = (kinds: readonly Kind[]) =>
  fc.record({
    afterMs: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 1_500 }), fc.integer({ min: 0, max: 120_000 })),
    kind: fc.constantFrom(...kinds),
  });
const eventsArb = (kinds: readonly Kind[]) => fc.array(eventArb(kinds), { maxLength: 300 });

/** The events at their times (a clock that only moves forward). */
function timed(events: readonly Event[], from = T0): { at: number; kind: Kind }[] {
  let at = from;
  return events.map((e) => ({ at: (at += e.afterMs), kind: e.kind }));
}

/** Feed the events to the throttle, as the breaker would: every kind is a request, a success an accept. */
function feed(policy: ThrottlePolicy, events: readonly { at: number; kind: Kind }[]): ThrottleState | null {
  let state: ThrottleState | null = null;
  for (const e of events) state = countRequest(policy, state, e.kind === 'success', e.at);
  return state;
}

/** The formula over a naive recount of the events whose second is inside the window at `now`. */
function naiveProbability(policy: ThrottlePolicy, events: readonly { at: number; kind: Kind }[], now: number): number {
  const firstSecond = Math.floor(now / 1000) - policy.windowSeconds + 1;
  const live = events.filter((e) => Math.floor(e.at / 1000) >= firstSecond);
  const requests = live.length;
  const accepts = live.filter((e) => e.kind === 'success').length;
  return Math.max(0, (requests - policy.k * accepts) / (requests + 1));
}

describe('soft throttling, properties', () => {
  it('the probability is in [0, 1) and equals the formula over a naive recount of the window', () => {
    fc.assert(
      fc.property(
        policyArb,
        eventsArb(['success', 'failure', 'refused']),
        fc.integer({ min: 0, max: 700_000 }),
        (policy, events, laterMs) => {
          const ev = timed(events);
          const state = feed(policy, ev);
          const now = (ev.at(-1)?.at ?? T0) + laterMs;
          const p = currentThrottleProbability(policy, state, now);
          expect(p).toBeGreaterThanOrEqual(0);
          expect(p).toBeLessThan(1);
          expect(p).toBeCloseTo(naiveProbability(policy, ev, now), 12);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('is 0 when every request was accepted, and never throttles then', () => {
    fc.assert(
      fc.property(
        policyArb,
        eventsArb(['success']),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (policy, events, draw) => {
          const ev = timed(events);
          const state = feed(policy, ev);
          const now = ev.at(-1)?.at ?? T0;
          expect(currentThrottleProbability(policy, state, now)).toBe(0);
          expect(decideThrottle(policy, state, now, () => draw).throttled).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('throttles exactly when the draw is below the probability', () => {
    fc.assert(
      fc.property(
        policyArb,
        eventsArb(['success', 'failure', 'refused']),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (policy, events, draw) => {
          const ev = timed(events);
          const state = feed(policy, ev);
          const now = ev.at(-1)?.at ?? T0;
          const decision = decideThrottle(policy, state, now, () => draw);
          expect(decision.probability).toBe(currentThrottleProbability(policy, state, now));
          expect(decision.throttled).toBe(draw < decision.probability);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps at most window_seconds buckets, and the counts never exceed what was fed', () => {
    fc.assert(
      fc.property(policyArb, eventsArb(['success', 'failure', 'refused']), (policy, events) => {
        const ev = timed(events);
        const state = feed(policy, ev);
        const now = ev.at(-1)?.at ?? T0;
        const buckets = state?.type === 'time' ? state.buckets.length : 0;
        expect(buckets).toBeLessThanOrEqual(policy.windowSeconds);
        const counts = throttleCounts(policy, state, now);
        expect(counts.requests).toBeLessThanOrEqual(ev.length);
        expect(counts.accepts).toBeLessThanOrEqual(counts.requests);
      }),
      { numRuns: 300 },
    );
  });
});
