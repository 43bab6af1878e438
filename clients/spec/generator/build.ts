/**
 * A small language for writing state-machine vectors: a vector names its policy and its
 * events; `expect` is computed by the server's domain (`runOnDomain`), and the optional
 * `want` of a step is the author's intent, checked at generation so a vector that no longer
 * says what its description says fails loudly instead of being written.
 */
import { policyFromWire, policyToWire, type PolicyWire } from '../../../src/domain/policy-wire.js';
import { runOnDomain } from './domain-runner.js';
import type { OutcomeKind } from '../../../src/domain/outcome-kind.js';
import type { Expect, OutcomeRule, Vector, WireEvent, WireState } from './format.js';

/** What the author expects of a step (checked against the domain's answer). */
export interface Want {
  readonly state?: WireState;
  readonly allowed?: boolean;
  readonly reason?: string;
  readonly failure_count?: number;
  readonly retry_at_ms?: number;
  readonly window_calls?: number;
  readonly probes_in_flight?: number;
  readonly effective_timeout_seconds?: number;
  readonly open_until_ms?: number | null;
  readonly throttled?: boolean;
  readonly probability?: number;
  /** Refused by a cool-down of this scope (issue 29). */
  readonly cool_down?: 'circuit' | 'caller';
  readonly cool_until_ms?: number | null;
  /** The callers cooling down, in order. */
  readonly cooling?: readonly string[];
  readonly ramp_until_ms?: number | null;
  readonly ramp_percent?: number;
  readonly window_failures?: number;
  readonly window_slow_calls?: number;
}

export interface Draft {
  readonly at_ms: number;
  readonly event: WireEvent;
  readonly want?: Want;
}

type WindowWire = NonNullable<PolicyWire['window']>;

/** A complete policy in its resolved wire form (every member explicit), circuitlog's defaults filled in. */
export function policy(p: Partial<PolicyWire> = {}): PolicyWire {
  const wire: PolicyWire = {
    failure_threshold: 5,
    timeout_seconds: 30,
    half_open_max_calls: 1,
    success_threshold: 1,
    window: null,
    backoff: null,
    forced_state: null,
    ...p,
  };
  // Vectors without a throttle leave it out, as policies written before it existed.
  const { throttle, ...rest } = policyToWire(policyFromWire(wire), true);
  return throttle == null ? rest : { ...rest, throttle };
}

export const countWindow = (size: number, w: Partial<WindowWire> = {}): WindowWire => ({ type: 'count', size, ...w });
export const timeWindow = (size: number, w: Partial<WindowWire> = {}): WindowWire => ({ type: 'time', size, ...w });

const st = (s: WireState | Want | undefined): Want | undefined => (typeof s === 'string' ? { state: s } : s);

export const fail = (
  at_ms: number,
  want?: WireState | Want,
  extra: { duration_ms?: number; timeout_seconds?: number } = {},
): Draft => ({
  at_ms,
  event: { type: 'outcome', success: false, ...extra },
  want: st(want),
});
export const ok = (at_ms: number, want?: WireState | Want, extra: { duration_ms?: number } = {}): Draft => ({
  at_ms,
  event: { type: 'outcome', success: true, ...extra },
  want: st(want),
});
/** A call that took `duration_ms`. */
export const took = (at_ms: number, success: boolean, duration_ms: number, want?: WireState | Want): Draft => ({
  at_ms,
  event: { type: 'outcome', success, duration_ms },
  want: st(want),
});
export const admit = (at_ms: number, want?: boolean | Want, draw?: number): Draft => ({
  at_ms,
  event: draw === undefined ? { type: 'admit' } : { type: 'admit', draw },
  want: typeof want === 'boolean' ? { allowed: want } : want,
});
/** An admission on a ramping circuit, drawing `random` (the ramp's draw). */
export const rampAdmit = (at_ms: number, random: number, want?: boolean | Want): Draft => ({
  at_ms,
  event: { type: 'admit', random },
  want: typeof want === 'boolean' ? { allowed: want } : want,
});

/** An outcome's kind and its detail, as the clients send them (issue 29). */
export type KindDetail = { retry_after_seconds?: number; deadline_ms?: number; duration_ms?: number };

/** An outcome of `kind` (no `success`, as the clients send a kind). */
export const kind = (at_ms: number, k: OutcomeKind, want?: WireState | Want, detail: KindDetail = {}): Draft => ({
  at_ms,
  event: { type: 'outcome', kind: k, ...detail },
  want: st(want),
});

/** The draft with the caller named on its event. */
export const by = (caller: string, d: Draft): Draft => ({ ...d, event: { ...d.event, caller } as Draft['event'] });
export const reset = (at_ms: number, want?: WireState | Want): Draft => ({
  at_ms,
  event: { type: 'reset' },
  want: st(want),
});
export const configure = (at_ms: number, p: PolicyWire, want?: WireState | Want): Draft => ({
  at_ms,
  event: { type: 'configure', policy: p },
  want: st(want),
});

/** `n` failures at `at_ms`, `at_ms + gap`, ... */
export function failures(n: number, at_ms: number, gap = 1): Draft[] {
  return Array.from({ length: n }, (_, i) => fail(at_ms + i * gap));
}
export function successes(n: number, at_ms: number, gap = 1): Draft[] {
  return Array.from({ length: n }, (_, i) => ok(at_ms + i * gap));
}

export interface VectorOptions {
  readonly rule?: OutcomeRule;
  readonly probeLeaseMs?: number;
  readonly createdAtMs?: number;
}

function check(id: string, index: number, want: Want, got: Expect): void {
  const problems: string[] = [];
  const same = (name: string, a: unknown, b: unknown) => {
    if (a !== undefined && a !== b)
      problems.push(`${name}: wanted ${JSON.stringify(a)}, domain says ${JSON.stringify(b)}`);
  };
  same('state', want.state, got.state);
  same('allowed', want.allowed, got.verdict.allowed);
  same('failure_count', want.failure_count, got.failure_count);
  same('retry_at_ms', want.retry_at_ms, got.verdict.allowed ? undefined : got.verdict.retry_at_ms);
  same('window_calls', want.window_calls, got.window?.calls);
  same('probes_in_flight', want.probes_in_flight, got.probes_in_flight);
  same('effective_timeout_seconds', want.effective_timeout_seconds, got.effective_timeout_seconds);
  same('open_until_ms', want.open_until_ms, got.open_until_ms);
  same('throttled', want.throttled, !got.verdict.allowed && got.verdict.throttled === true);
  same('probability', want.probability, got.throttle?.probability);
  same('cool_down', want.cool_down, got.verdict.allowed ? undefined : got.verdict.cool_down);
  same('cool_until_ms', want.cool_until_ms, got.cool_until_ms);
  same('ramp_until_ms', want.ramp_until_ms, got.ramp_until_ms);
  same('ramp_percent', want.ramp_percent, got.ramp_percent);
  same('window_failures', want.window_failures, got.window?.failures);
  same('window_slow_calls', want.window_slow_calls, got.window?.slow_calls);
  if (want.cooling !== undefined)
    same('cooling', want.cooling.join(','), (got.cooling_callers ?? []).map((e) => e.caller).join(','));
  if (want.reason !== undefined && !got.transitions.some((t) => t.reason === want.reason)) {
    problems.push(`reason: wanted a ${want.reason} transition, got ${JSON.stringify(got.transitions)}`);
  }
  if (problems.length > 0) throw new Error(`vector ${id}, step ${index}: ${problems.join('; ')}`);
}

/** A vector with its expectations computed by the domain (and its `want`s checked). */
export function vector(
  id: string,
  tags: readonly string[],
  description: string,
  p: PolicyWire,
  steps: readonly (Draft | readonly Draft[])[],
  options: VectorOptions = {},
): Vector {
  const drafts = steps.flat();
  const runnable = {
    outcome_rule: options.rule ?? 'count_only',
    probe_lease_ms: options.probeLeaseMs ?? 10_000,
    created_at_ms: options.createdAtMs ?? drafts[0]?.at_ms ?? 0,
    policy: p,
    steps: drafts.map((d) => ({ at_ms: d.at_ms, event: d.event })),
  };
  const expects = runOnDomain(runnable);
  drafts.forEach((d, i) => {
    if (d.want !== undefined) check(id, i, d.want, expects[i]!);
  });
  return {
    id,
    tags,
    description,
    ...runnable,
    steps: runnable.steps.map((s, i) => ({ ...s, expect: expects[i]! })),
  };
}
