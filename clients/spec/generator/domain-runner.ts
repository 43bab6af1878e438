/**
 * Runs a state-machine vector through the server's own pure state machine (`src/domain/`):
 * the generator fills `expect` with what this returns, and the spec test replays the
 * committed file through it, so the vectors are true of the server.
 */
import {
  activeLeases,
  admit,
  configure,
  effectiveTimeoutSeconds,
  isCallAllowed,
  newCircuit,
  recordOutcome,
  refresh,
  reset,
  windowStats,
  type Circuit,
  type Step as DomainStep,
  type Verdict,
} from '../../../src/domain/circuit.js';
import { policyFromWire } from '../../../src/domain/policy-wire.js';
import { throttleCounts, throttleProbability } from '../../../src/domain/throttle.js';
import type { Expect, OutcomeRule, WireEvent, WireVerdict } from './format.js';

/** What a vector needs to run: its policy, rule, lease and events. */
export interface RunnableVector {
  readonly outcome_rule: OutcomeRule;
  readonly probe_lease_ms: number;
  readonly created_at_ms: number;
  readonly policy: Parameters<typeof policyFromWire>[0];
  readonly steps: readonly { readonly at_ms: number; readonly event: WireEvent }[];
}

export function wireVerdict(v: Verdict): WireVerdict {
  if (v.allowed) return { allowed: true };
  return {
    allowed: false,
    retry_at_ms: v.retryAt,
    forced: v.forced === true,
    ...(v.scope === undefined ? {} : { scope: v.scope }),
    ...(v.throttled === undefined ? {} : { throttled: true as const }),
  };
}

function expectOf(c: Circuit, step: DomainStep, verdict: Verdict, now: number): Expect {
  const stats = windowStats(c, now);
  return {
    state: c.state,
    failure_count: c.failureCount,
    probe_successes: c.probeSuccesses,
    probes_in_flight: c.state === 'half_open' ? activeLeases(c, now).length : 0,
    reopen_count: c.reopenCount,
    timeout_seconds: c.timeoutSeconds,
    effective_timeout_seconds: effectiveTimeoutSeconds(c),
    open_until_ms: c.openUntil,
    window: stats === null ? null : { calls: stats.calls, failures: stats.failures, slow_calls: stats.slowCalls },
    ...throttleOf(c, now),
    transitions: step.transitions.map((t) => ({ from: t.from, to: t.to, reason: t.reason, at_ms: t.at })),
    verdict: wireVerdict(verdict),
  };
}

/** The throttle's figures, only for a circuit with a throttle (the other vectors leave the member out). */
function throttleOf(c: Circuit, now: number): Pick<Expect, 'throttle'> {
  if (c.throttle === null) return {};
  const counts = throttleCounts(c.throttle, c.throttleState, now);
  const probability = c.state === 'closed' && c.forcedState === null ? throttleProbability(c.throttle.k, counts) : 0;
  return { throttle: { ...counts, probability } };
}

/** A vector's admission draws its `draw`; one that needs a draw and has none is a broken vector. */
function drawOf(event: { readonly draw?: number }): () => number {
  return () => {
    if (event.draw === undefined) throw new Error('this admit draws a random number: give the event a draw');
    return event.draw;
  };
}

/** One event on the domain; `admit` answers with its own verdict, any other with a peek. */
function apply(
  c: Circuit,
  event: WireEvent,
  now: number,
  rule: OutcomeRule,
  probeLeaseMs: number,
): { step: DomainStep; verdict: Verdict } {
  switch (event.type) {
    case 'admit': {
      const admission = admit(c, now, { probeLeaseMs }, event.caller, drawOf(event));
      return { step: admission, verdict: admission.verdict };
    }
    case 'outcome':
      return peeked(
        recordOutcome(
          c,
          {
            success: event.success,
            durationMs: event.duration_ms,
            timeoutSeconds: event.timeout_seconds,
            late: rule,
            ...endedAt(event.ended_at_ms),
            ...(event.caller === undefined ? {} : { caller: event.caller }),
          },
          now,
        ),
        now,
      );
    case 'reset':
      return peeked(reset(c, now), now);
    case 'configure':
      return peeked(configure(c, policyFromWire(event.policy), now), now);
    default:
      throw new Error(`unknown event ${JSON.stringify(event satisfies never)}`);
  }
}

/** The domain's `at` of an outcome (when the call ended), only when the vector gives one. */
function endedAt(ms: number | undefined): { at?: number } {
  return ms === undefined ? {} : { at: ms };
}

/** What a call at `now` would be told, without taking a probe slot. */
function peeked(step: DomainStep, now: number): { step: DomainStep; verdict: Verdict } {
  return { step, verdict: isCallAllowed(refresh(step.circuit, now).circuit, now) };
}

/** The expected breaker after each step of the vector. */
export function runOnDomain(vector: RunnableVector): Expect[] {
  let circuit = newCircuit('spec', policyFromWire(vector.policy), vector.created_at_ms);
  return vector.steps.map(({ at_ms, event }) => {
    const { step, verdict } = apply(circuit, event, at_ms, vector.outcome_rule, vector.probe_lease_ms);
    circuit = step.circuit;
    return expectOf(circuit, step, verdict, at_ms);
  });
}
