import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admit, configure, newCircuit, refresh, reset } from '../../src/domain/circuit.js';
import { encodeEntry, type HistoryEntry, type StoredEntry, transitionEntries } from '../../src/domain/history.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import { OUTCOME_KINDS } from '../../src/domain/outcome-kind.js';
import { type CircuitPolicy, policyOf, samePolicy } from '../../src/domain/policy.js';
import type { Circuit, Outcome, Step } from '../../src/domain/types.js';
import { backtest, proposedPolicy } from '../../src/lab/backtest.js';
import { callStep, outcomeStep } from '../../src/service/breaker-service.js';

/**
 * Issue 31's fidelity proof on the pure engine: random outcomes with time gaps, policy
 * changes, forces, resets, reads and the due job, recorded as the service and the stores
 * record them (the service's own `outcomeStep`/`callStep`, the history hook's entries through
 * `encodeEntry`, then `transitionEntries` of the step), under every policy kind; replaying
 * them with the live policy reproduces every recorded transition, same time, states and reason.
 */

const T0 = Date.UTC(2026, 11, 1);
const BREAKER = { probeLeaseMs: 10_000 };

/** Every policy kind, in wire form (validated as PATCH validates it). */
const KINDS: Readonly<Record<string, Record<string, unknown>>> = {
  count: { failure_threshold: 3, timeout_seconds: 2, half_open_max_calls: 2, success_threshold: 2 },
  window_count: {
    failure_threshold: 50,
    timeout_seconds: 3,
    window: { type: 'count', size: 6, failure_rate_threshold: 50 },
  },
  window_time: {
    failure_threshold: 50,
    timeout_seconds: 2,
    window: { type: 'time', size: 5, minimum_calls: 3, failure_rate_threshold: 40 },
  },
  slow_calls: {
    failure_threshold: 50,
    timeout_seconds: 2,
    window: { type: 'count', size: 5, slow_call_duration_ms: 100, slow_call_rate_threshold: 60 },
  },
  backoff: { failure_threshold: 2, timeout_seconds: 1, backoff: { multiplier: 2, max_timeout_seconds: 8 } },
  quorum: {
    failure_threshold: 2,
    timeout_seconds: 2,
    window: { type: 'time', size: 10, minimum_calls: 2, failure_rate_threshold: 30 },
    quorum: { min_callers: 2, window_seconds: 10, max_callers: 10 },
  },
  kinds: {
    failure_threshold: 3,
    timeout_seconds: 2,
    count_as: { rejected: 'failure', cancelled: 'ignore', caller_deadline: 'failure' },
    min_deadline_ms: 50,
  },
  throttle: {
    failure_threshold: 4,
    timeout_seconds: 2,
    throttle: { k: 1.2, window_seconds: 10 },
  },
  ramp: { failure_threshold: 2, timeout_seconds: 1, ramp: { seconds: 10, start_percent: 20 } },
  cool_down: { failure_threshold: 3, timeout_seconds: 2, max_retry_after_seconds: 5 },
};

function policy(wire: Record<string, unknown>): CircuitPolicy {
  return proposedPolicy(POLICY_DEFAULTS.circuit, POLICY_DEFAULTS.circuit, wire);
}

type Event =
  | { readonly type: 'gap'; readonly ms: number }
  | {
      readonly type: 'outcome';
      readonly via: 'call' | 'record';
      readonly success: boolean;
      readonly kind: number; // -1: none, else an index into OUTCOME_KINDS
      readonly caller: number; // -1: none
      readonly durationMs: number;
      readonly atBackMs: number; // -1: no `at`
      readonly retryAfterSeconds: number;
      readonly draw: number;
    }
  | { readonly type: 'configure'; readonly change: 'force_open' | 'force_closed' | 'clear' | 'tweak' }
  | { readonly type: 'reset' }
  | { readonly type: 'get' }
  | { readonly type: 'allowed'; readonly draw: number }
  | { readonly type: 'due' };

const eventArb: fc.Arbitrary<Event> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      type: fc.constant('gap' as const),
      ms: fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 0, max: 6_000 })),
    }),
  },
  {
    weight: 12,
    arbitrary: fc.record({
      type: fc.constant('outcome' as const),
      via: fc.constantFrom('call' as const, 'record' as const),
      success: fc.boolean(),
      kind: fc.oneof({ weight: 5, arbitrary: fc.constant(-1) }, fc.integer({ min: 0, max: OUTCOME_KINDS.length - 1 })),
      caller: fc.integer({ min: -1, max: 2 }),
      durationMs: fc.integer({ min: 1, max: 200 }),
      atBackMs: fc.oneof(fc.constant(-1), fc.integer({ min: 0, max: 3_000 })),
      retryAfterSeconds: fc.integer({ min: 1, max: 8 }),
      draw: fc.double({ min: 0, max: 0.999, noNaN: true }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      type: fc.constant('configure' as const),
      change: fc.constantFrom('force_open' as const, 'force_closed' as const, 'clear' as const, 'tweak' as const),
    }),
  },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('reset' as const) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('get' as const) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      type: fc.constant('allowed' as const),
      draw: fc.double({ min: 0, max: 0.999, noNaN: true }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('due' as const) }) },
);

/** The history a server with this live policy records for these events (see the file's comment). */
function record(start: CircuitPolicy, events: readonly Event[]) {
  const entries: StoredEntry[] = [];
  let c: Circuit | null = null;
  let live = start;
  let now = T0;
  let createdAt: number | null = null;
  const write = (entry: HistoryEntry | null, step: Step, t: number) => {
    if (entry !== null) entries.push({ t, text: encodeEntry(entry) });
    for (const e of transitionEntries(t, step.transitions)) entries.push({ t, text: encodeEntry(e) });
    c = step.circuit;
  };
  for (const e of events) {
    now += 1;
    if (e.type === 'gap') now += e.ms;
    else if (e.type === 'outcome') {
      const outcome: Outcome = {
        success: e.success,
        ...(e.kind < 0 ? {} : { kind: OUTCOME_KINDS[e.kind]! }),
        ...(e.caller < 0 ? {} : { caller: `caller-${e.caller}` }),
        durationMs: e.durationMs,
        ...(e.atBackMs < 0 ? {} : { at: now - e.atBackMs }),
        ...(e.kind >= 0 && OUTCOME_KINDS[e.kind] === 'throttled' ? { retryAfterSeconds: e.retryAfterSeconds } : {}),
        ...(e.kind >= 0 && OUTCOME_KINDS[e.kind] === 'caller_deadline' ? { deadlineMs: e.durationMs } : {}),
      };
      const ctx = { name: 'c', settings: live, now };
      createdAt ??= now;
      if (e.via === 'record') write({ type: 'outcome', t: now, outcome }, outcomeStep(ctx, outcome)(c), now);
      else {
        const admission = callStep(
          ctx,
          outcome,
          BREAKER,
          () => e.draw,
          () => e.draw,
        )(c);
        write(admission.verdict.allowed ? { type: 'outcome', t: now, outcome } : null, admission, now);
      }
    } else if (e.type === 'configure') {
      const next: CircuitPolicy =
        e.change === 'tweak'
          ? { ...live, timeoutSeconds: live.timeoutSeconds === 2 ? 3 : 2 }
          : { ...live, forcedState: e.change === 'clear' ? null : e.change === 'force_open' ? 'open' : 'closed' };
      live = next;
      if (c === null) {
        createdAt ??= now;
        const step = configure(newCircuit('c', { ...next, forcedState: null }, now), next, now);
        write({ type: 'manual', t: now, action: 'configure', before: null, after: policyOf(step.circuit) }, step, now);
      } else {
        const before: Circuit = c;
        const refreshed = refresh(before, now);
        const step = configure(refreshed.circuit, next, now);
        const both = { circuit: step.circuit, transitions: [...refreshed.transitions, ...step.transitions] };
        const changed = !samePolicy(policyOf(before), policyOf(step.circuit));
        write(
          changed
            ? { type: 'manual', t: now, action: 'configure', before: policyOf(before), after: policyOf(step.circuit) }
            : null,
          both,
          now,
        );
      }
    } else if (c !== null) {
      const current: Circuit = c;
      if (e.type === 'reset') {
        const step = reset(current, now);
        write(step.circuit === current ? null : { type: 'manual', t: now, action: 'reset' }, step, now);
      } else if (e.type === 'get') write(null, refresh(current, now), now);
      else if (e.type === 'allowed')
        write(
          null,
          admit(
            current,
            now,
            BREAKER,
            undefined,
            () => e.draw,
            () => e.draw,
          ),
          now,
        );
      else if (current.state === 'open' && current.openUntil !== null && current.openUntil <= now) {
        write(null, refresh(current, now), now); // the due job
      }
    }
  }
  return { entries, live, createdAt: createdAt ?? T0, end: now + 1 };
}

describe('the live replay reproduces the recorded transitions (fidelity, issue 31)', () => {
  for (const [i, [kind, wire]] of Object.entries(KINDS).entries()) {
    it(`is exact for 20 random histories under the ${kind} policy`, () => {
      const start = policy(wire);
      fc.assert(
        fc.property(fc.array(eventArb, { minLength: 100, maxLength: 400 }), (events) => {
          const h = record(start, events);
          const result = backtest({
            circuit: 'c',
            entries: h.entries,
            current: h.live,
            proposed: [start],
            from: T0,
            to: h.end,
            createdAt: h.createdAt,
          });
          expect(result.fidelity.first_mismatch).toBeNull();
          expect(result.fidelity.ratio).toBe(1);
        }),
        { numRuns: 20, seed: 31 + i },
      );
    });
  }
});
