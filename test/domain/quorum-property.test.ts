/**
 * Properties of the quorum over any sequence of (caller, outcome): the fleet is never
 * refused on one caller's word, and the quorum the domain keeps is a naive recount.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { callerEntries } from '../../src/domain/caller-state.js';
import { admit, newCircuit, recordOutcome, type Circuit } from '../../src/domain/circuit.js';
import type { WindowPolicy } from '../../src/domain/policy.js';
import { quorumCallers, type QuorumPolicy } from '../../src/domain/quorum.js';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const lease = { probeLeaseMs: 5_000 };
const CALLERS = ['a', 'b', 'c', 'd', 'e'] as const;

const window = fc.option(
  fc.record<WindowPolicy>({
    type: fc.constantFrom('count', 'time'),
    size: fc.integer({ min: 2, max: 20 }),
    minimumCalls: fc.constant(null),
    failureRateThreshold: fc.integer({ min: 10, max: 100 }),
    slowCallDurationMs: fc.option(fc.constant(1_000), { nil: null }),
    slowCallRateThreshold: fc.integer({ min: 10, max: 100 }),
  }),
  { nil: null },
);
const quorum = fc.record<QuorumPolicy>({
  minCallers: fc.integer({ min: 2, max: 4 }),
  windowSeconds: fc.integer({ min: 1, max: 60 }),
  maxCallers: fc.constant(1_000),
});
const policy = fc.record({
  failureThreshold: fc.integer({ min: 1, max: 5 }),
  timeoutSeconds: fc.integer({ min: 1, max: 20 }),
  halfOpenMaxCalls: fc.integer({ min: 1, max: 2 }),
  window,
  quorum,
});
/** One step: a caller (or anonymous) records an outcome or asks to be admitted, `dtMs` after the last. */
const action = fc.record({
  caller: fc.option(fc.constantFrom(...CALLERS), { nil: undefined }),
  kind: fc.constantFrom('fail', 'fail', 'pass', 'slow', 'admit'),
  late: fc.constantFrom('count_only' as const, 'circuitlog' as const),
  dtMs: fc.integer({ min: 0, max: 8_000 }),
});

type Action = typeof action extends fc.Arbitrary<infer A> ? A : never;
type Policy = typeof policy extends fc.Arbitrary<infer P> ? P : never;
type Evidence = { caller: string; at: number; kind: 'failure' | 'slow' };

/** Distinct named callers with evidence of `kind` at or after `now - windowSeconds`. */
function naive(history: readonly Evidence[], kind: Evidence['kind'], q: QuorumPolicy, now: number): string[] {
  const from = now - q.windowSeconds * 1000;
  return [...new Set(history.filter((e) => e.kind === kind && e.at >= from).map((e) => e.caller))].sort();
}

/** Run the actions; `check` sees the circuit, the evidence so far and the time after each. */
function run(
  p: Policy,
  actions: readonly Action[],
  check: (c: Circuit, history: readonly Evidence[], now: number) => void,
): void {
  let c = newCircuit('svc', p, T0);
  let now = T0;
  const history: Evidence[] = [];
  for (const a of actions) {
    now += a.dtMs;
    if (a.kind === 'admit') {
      c = admit(c, now, lease, a.caller).circuit;
    } else {
      const durationMs = a.kind === 'slow' ? 2_000 : 10;
      const step = recordOutcome(c, { success: a.kind !== 'fail', durationMs, late: a.late, caller: a.caller }, now);
      if (a.caller !== undefined && a.kind === 'fail') history.push({ caller: a.caller, at: now, kind: 'failure' });
      if (a.caller !== undefined && c.window?.slowCallDurationMs != null && durationMs >= c.window.slowCallDurationMs) {
        history.push({ caller: a.caller, at: now, kind: 'slow' });
      }
      for (const t of step.transitions) {
        if (t.from === 'closed' && t.to === 'open') {
          const kind = t.reason === 'slow_call_rate_exceeded' ? 'slow' : 'failure';
          // The opening itself had a quorum: min_callers distinct callers failed (or were slow) in the window.
          expect(naive(history, kind, p.quorum, now).length).toBeGreaterThanOrEqual(p.quorum.minCallers);
        }
      }
      c = step.circuit;
    }
    check(c, history, now);
  }
}

describe('quorum properties', () => {
  it('never refuses a healthy caller unless min_callers distinct callers failed in the window', () => {
    fc.assert(
      fc.property(policy, fc.array(action, { maxLength: 120 }), (p, actions) => {
        run(p, actions, (c, _history, now) => {
          const verdict = admit(c, now, lease, 'healthy').verdict;
          // A refusal can only come from the circuit itself (opened with a quorum, asserted in run), never scoped to this caller.
          if (!verdict.allowed) {
            expect(verdict.scope).toBeUndefined();
            expect(c.state).not.toBe('closed');
          }
        });
      }),
      { numRuns: 400 },
    );
  });

  it('keeps a quorum equal to a naive recount of the callers that failed (and were slow) in the window', () => {
    fc.assert(
      fc.property(policy, fc.array(action, { maxLength: 120 }), (p, actions) => {
        run(p, actions, (c, history, now) => {
          expect(quorumCallers(callerEntries(c), 'failure', p.quorum, now)).toEqual(
            naive(history, 'failure', p.quorum, now),
          );
          expect(quorumCallers(callerEntries(c), 'slow', p.quorum, now)).toEqual(naive(history, 'slow', p.quorum, now));
        });
      }),
      { numRuns: 400 },
    );
  });
});
