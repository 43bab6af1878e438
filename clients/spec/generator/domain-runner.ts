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
import { coolVerdict, rampPercentOf } from '../../../src/domain/outcome-rules.js';
import { policyFromWire, type PolicyWire } from '../../../src/domain/policy-wire.js';
import { throttleCounts, throttleProbability } from '../../../src/domain/throttle.js';
import type { Transition } from '../../../src/domain/types.js';
import type { CoolingExpect, Expect, OutcomeRule, WireEvent, WireTransition, WireVerdict } from './format.js';

/** What a vector needs to run: its policy, rule, lease and events. */
export interface RunnableVector {
  readonly outcome_rule: OutcomeRule;
  readonly probe_lease_ms: number;
  readonly created_at_ms: number;
  readonly policy: Parameters<typeof policyFromWire>[0];
  readonly steps: readonly { readonly at_ms: number; readonly event: WireEvent }[];
}

export function wireVerdict(v: Verdict): WireVerdict {
  if (v.allowed)
    return v.rampPercent === undefined ? { allowed: true } : { allowed: true, ramp_percent: v.rampPercent };
  return {
    allowed: false,
    retry_at_ms: v.retryAt,
    forced: v.forced === true,
    ...(v.scope === undefined ? {} : { scope: v.scope }),
    ...(v.throttled === undefined ? {} : { throttled: true as const }),
    ...(v.cooled === undefined ? {} : { cool_down: v.cooled.scope }),
    ...(v.ramping === undefined ? {} : { ramp_percent: v.ramping.percent, ramp_until_ms: v.ramping.until }),
  };
}

/** A transition in wire form; issue 29's events with their detail (the others as they always were). */
function wireTransition(t: Transition): WireTransition {
  const base = { from: t.from, to: t.to, reason: t.reason, at_ms: t.at };
  const cooling = t.reason === 'cool_down' || t.reason === 'cool_down_ended';
  return {
    ...base,
    ...(cooling && t.scope !== undefined ? { scope: t.scope } : {}),
    ...(cooling && t.callers !== undefined ? { callers: t.callers } : {}),
    ...(cooling && t.until !== undefined ? { until_ms: t.until } : {}),
    ...(cooling && t.retryAfterSeconds !== undefined ? { retry_after_seconds: t.retryAfterSeconds } : {}),
    ...(t.rampUntil === undefined ? {} : { ramp_until_ms: t.rampUntil }),
  };
}

/** Issue 29's figures as the circuit's JSON shows them at `now` (src/http/circuit-json.ts does the same). */
function coolingOf(c: Circuit, now: number): CoolingExpect {
  const ramping = c.state === 'closed' && c.ramp != null && c.rampUntil != null && now < c.rampUntil;
  return {
    cool_until_ms: c.coolUntil != null && c.coolUntil > now ? c.coolUntil : null,
    cooling_callers: (c.coolCallers ?? [])
      .filter((e) => e[1] > now)
      .map(([caller, until]) => ({ caller, cool_until_ms: until })),
    ramp_until_ms: ramping ? c.rampUntil! : null,
    ramp_percent: ramping ? rampPercentOf(c, now) : 100,
  };
}

function expectOf(c: Circuit, step: DomainStep, verdict: Verdict, now: number, cooling: boolean): Expect {
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
    ...(cooling ? coolingOf(c, now) : {}),
    transitions: step.transitions.map(wireTransition),
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

/** A ramping admission draws its `random` (the ramp's own draw, apart from the throttle's `draw`). */
function rampDrawOf(event: { readonly random?: number }): () => number {
  return () => {
    if (event.random === undefined) throw new Error('this admit ramps: give the event a random');
    return event.random;
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
      const admission = admit(c, now, { probeLeaseMs }, event.caller, drawOf(event), rampDrawOf(event));
      return { step: admission, verdict: admission.verdict };
    }
    case 'outcome':
      return peeked(
        recordOutcome(
          c,
          {
            // With a kind, the kind decides (`success` only completes the domain's record).
            success: event.success ?? event.kind === 'success',
            ...(event.kind === undefined ? {} : { kind: event.kind }),
            ...(event.retry_after_seconds === undefined ? {} : { retryAfterSeconds: event.retry_after_seconds }),
            ...(event.deadline_ms === undefined ? {} : { deadlineMs: event.deadline_ms }),
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

/**
 * What an anonymous call at `now` would be told, without taking a probe slot: a circuit-wide
 * cool-down refuses it (as `admit` would); no draw is taken, so never a throttle or ramp refusal.
 */
function peeked(step: DomainStep, now: number): { step: DomainStep; verdict: Verdict } {
  const c = refresh(step.circuit, now).circuit;
  const verdict = isCallAllowed(c, now);
  const cooled =
    verdict.allowed && c.state === 'closed' && c.forcedState === null ? coolVerdict(c, undefined, now) : null;
  return { step, verdict: cooled ?? verdict };
}

const KIND_FIELDS = ['count_as', 'min_deadline_ms', 'max_retry_after_seconds', 'throttle_scope', 'ramp'] as const;

/**
 * Whether the vector is one of issue 29's (an outcome with a `kind`, an admission with a ramp's
 * `random`, a policy with one of its fields): those expect the cool-down's and the ramp's figures.
 */
export function usesKinds(vector: Pick<RunnableVector, 'policy' | 'steps'>): boolean {
  const kindsPolicy = (p: PolicyWire) => KIND_FIELDS.some((f) => p[f] !== undefined);
  return (
    kindsPolicy(vector.policy) ||
    vector.steps.some(({ event: e }) =>
      e.type === 'outcome'
        ? e.kind !== undefined
        : e.type === 'admit'
          ? e.random !== undefined
          : e.type === 'configure' && kindsPolicy(e.policy),
    )
  );
}

/** The expected breaker after each step of the vector. */
export function runOnDomain(vector: RunnableVector): Expect[] {
  let circuit = newCircuit('spec', policyFromWire(vector.policy), vector.created_at_ms);
  const cooling = usesKinds(vector);
  return vector.steps.map(({ at_ms, event }) => {
    const { step, verdict } = apply(circuit, event, at_ms, vector.outcome_rule, vector.probe_lease_ms);
    circuit = step.circuit;
    return expectOf(circuit, step, verdict, at_ms, cooling);
  });
}
