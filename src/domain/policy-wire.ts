/**
 * The policy's wire form: the snake_case JSON of the HTTP API and the config file, mapped
 * to the domain's `CircuitPolicy` and back, once. Validation is the edges' (zod in
 * `policy-schema.ts`); the client reads a server's JSON leniently with `policyFromJson`.
 */
import { POLICY_DEFAULTS } from './policy-defaults.js';
import { isOutcomeKind, type OutcomeKind } from './outcome-kind.js';
import { kindPolicy, throttleScope } from './outcome-rules.js';
import {
  isDefaultKinds,
  minimumCalls,
  type BackoffPolicy,
  type CircuitPolicy,
  type CountAs,
  type KindPolicy,
  type RampPolicy,
  type ForcedState,
  type QuorumPolicy,
  type WindowPolicy,
} from './policy.js';

import { THROTTLE_LIMITS, type ThrottlePolicy } from './throttle.js';

/** `window` on the wire; a member left out (or null) takes its default. */
export type WindowWire = {
  readonly type: 'count' | 'time';
  readonly size: number; // outcomes (count) or seconds (time)
  readonly minimum_calls?: number | null;
  readonly failure_rate_threshold?: number | null; // percent
  readonly slow_call_duration_ms?: number | null;
  readonly slow_call_rate_threshold?: number | null; // percent
};

/** `backoff` on the wire; a member left out (or null) takes its default. */
export type BackoffWire = {
  readonly multiplier?: number | null;
  readonly max_timeout_seconds?: number | null;
};

/** `throttle` on the wire (soft throttling, `throttle.ts`); a member left out (or null) takes its default. */
export type ThrottleWire = {
  readonly k?: number | null;
  readonly window_seconds?: number | null; // seconds
};

/** `quorum` on the wire (issue 17); a member left out (or null) takes its default. */
export type QuorumWire = {
  readonly min_callers: number;
  readonly window_seconds?: number | null; // seconds
  readonly max_callers?: number | null;
};

/** A complete policy on the wire. */
export type PolicyWire = KindsWire & {
  readonly failure_threshold: number;
  readonly timeout_seconds: number;
  readonly half_open_max_calls: number;
  readonly success_threshold: number;
  readonly window: WindowWire | null;
  readonly backoff: BackoffWire | null;
  readonly forced_state: ForcedState | null;
  /** Left out: none (a policy written before it existed). */
  readonly throttle?: ThrottleWire | null;
  /** Absent means null (none): policies written before issue 17 read as they always did. */
  readonly quorum?: QuorumWire | null;
  /** The outcome history (issue 31); absent or null: on (a policy's own form shows only `false`). */
  readonly history?: boolean | null;
};

function windowFromWire(w: WindowWire): WindowPolicy {
  const defaults = POLICY_DEFAULTS.window;
  return {
    type: w.type,
    size: w.size,
    minimumCalls: w.minimum_calls ?? null,
    failureRateThreshold: w.failure_rate_threshold ?? defaults.failureRateThreshold,
    slowCallDurationMs: w.slow_call_duration_ms ?? null,
    slowCallRateThreshold: w.slow_call_rate_threshold ?? defaults.slowCallRateThreshold,
  };
}

function backoffFromWire(b: BackoffWire, timeoutSeconds: number): BackoffPolicy {
  const defaults = POLICY_DEFAULTS.backoff;
  return {
    multiplier: b.multiplier ?? defaults.multiplier,
    maxTimeoutSeconds: b.max_timeout_seconds ?? Math.max(defaults.maxTimeoutSeconds, timeoutSeconds),
  };
}

function throttleFromWire(t: ThrottleWire): ThrottlePolicy {
  const defaults = POLICY_DEFAULTS.throttle;
  return { k: t.k ?? defaults.k, windowSeconds: t.window_seconds ?? defaults.windowSeconds };
}

/** Wire form to the domain's policy, filling the window's, backoff's and throttle's defaults. */
export function policyFromWire(w: PolicyWire): CircuitPolicy {
  return {
    failureThreshold: w.failure_threshold,
    timeoutSeconds: w.timeout_seconds,
    halfOpenMaxCalls: w.half_open_max_calls,
    successThreshold: w.success_threshold,
    window: w.window && windowFromWire(w.window),
    backoff: w.backoff && backoffFromWire(w.backoff, w.timeout_seconds),
    forcedState: w.forced_state,
    throttle: w.throttle == null ? null : throttleFromWire(w.throttle),
    ...(w.quorum == null ? {} : { quorum: quorumFromWire(w.quorum) }),
    ...kindsFromWire(w),
    ...(w.history === false ? { history: false } : {}),
  };
}

function quorumFromWire(q: QuorumWire): QuorumPolicy {
  const defaults = POLICY_DEFAULTS.quorum;
  return {
    minCallers: q.min_callers,
    windowSeconds: q.window_seconds ?? defaults.windowSeconds,
    maxCallers: q.max_callers ?? defaults.maxCallers,
  };
}

/**
 * The domain's policy in wire form. `resolved` (for display) spells out the window's
 * default minimum_calls; without it (a merge base) a defaulted member is left out, so it
 * keeps following its default.
 */
export function policyToWire(p: CircuitPolicy, resolved: boolean): PolicyWire {
  const w = p.window;
  return {
    failure_threshold: p.failureThreshold,
    timeout_seconds: p.timeoutSeconds,
    half_open_max_calls: p.halfOpenMaxCalls,
    success_threshold: p.successThreshold,
    window: w && {
      type: w.type,
      size: w.size,
      ...(resolved || w.minimumCalls !== null ? { minimum_calls: minimumCalls(w) } : {}),
      failure_rate_threshold: w.failureRateThreshold,
      ...(resolved || w.slowCallDurationMs !== null ? { slow_call_duration_ms: w.slowCallDurationMs } : {}),
      slow_call_rate_threshold: w.slowCallRateThreshold,
    },
    backoff: p.backoff && { multiplier: p.backoff.multiplier, max_timeout_seconds: p.backoff.maxTimeoutSeconds },
    forced_state: p.forcedState,
    throttle: p.throttle && { k: p.throttle.k, window_seconds: p.throttle.windowSeconds },
    // Only when set, as the domain's own field: policies without one read as they always did.
    ...(p.quorum == null
      ? {}
      : {
          quorum: {
            min_callers: p.quorum.minCallers,
            window_seconds: p.quorum.windowSeconds,
            max_callers: p.quorum.maxCallers,
          },
        }),
    // Only those set: a policy without them reads as it always did (the circuit's JSON shows all: `kindsDisplay`).
    ...kindsToWire(p),
    // Resolved (for display) always; else only when off (issue 31), so a policy that keeps it reads as it always did.
    ...(p.history === false ? { history: false } : resolved ? { history: true } : {}),
  };
}

const isRecord = (v: unknown): v is Readonly<Record<string, unknown>> => typeof v === 'object' && v !== null;
const positive = (v: unknown): number | undefined => (typeof v === 'number' && v > 0 ? v : undefined);
const positiveInt = (v: unknown): number | undefined => (Number.isInteger(v) ? positive(v) : undefined);
const numberOrNull = (v: unknown): number | null => (typeof v === 'number' ? v : null);

/** A window from untrusted JSON: null unless its type and size are usable; bad members take their defaults. */
function windowWireFrom(w: unknown): WindowWire | null {
  if (!isRecord(w) || (w.type !== 'count' && w.type !== 'time') || typeof w.size !== 'number') return null;
  return {
    type: w.type,
    size: w.size,
    minimum_calls: numberOrNull(w.minimum_calls),
    failure_rate_threshold: positive(w.failure_rate_threshold),
    slow_call_duration_ms: numberOrNull(w.slow_call_duration_ms),
    slow_call_rate_threshold: positive(w.slow_call_rate_threshold),
  };
}

/** A throttle from untrusted JSON: null unless an object; a member out of range takes its default. */
function throttleWireFrom(t: unknown): ThrottleWire | null {
  if (!isRecord(t)) return null;
  const { minK, maxK, minWindowSeconds, maxWindowSeconds } = THROTTLE_LIMITS;
  const k = typeof t.k === 'number' && t.k >= minK && t.k <= maxK ? t.k : null;
  const w = positiveInt(t.window_seconds);
  return { k, window_seconds: w !== undefined && w >= minWindowSeconds && w <= maxWindowSeconds ? w : null };
}

/** The `throttle` member of a server's circuit JSON, read leniently (`throttleWireFrom`): null when absent or not an object. */
export function throttleFromJson(t: unknown): ThrottlePolicy | null {
  const wire = throttleWireFrom(t);
  return wire === null ? null : throttleFromWire(wire);
}

function backoffWireFrom(b: unknown): BackoffWire | null {
  return isRecord(b)
    ? { multiplier: positive(b.multiplier), max_timeout_seconds: positiveInt(b.max_timeout_seconds) }
    : null;
}

/**
 * The policy in a circuit's JSON from a server (docs/api.md), read field by field: a
 * missing or malformed field takes `fallback`'s value (a missing `window`, `backoff` or
 * `throttle` too; a malformed one is none), so an older server's JSON works too. `forced_state` is
 * only ever the JSON's.
 */
export function policyFromJson(json: Readonly<Record<string, unknown>> | null, fallback: CircuitPolicy): CircuitPolicy {
  const policy = policyFromWire({
    failure_threshold: positiveInt(json?.failure_threshold) ?? fallback.failureThreshold,
    timeout_seconds: positiveInt(json?.timeout_seconds) ?? fallback.timeoutSeconds,
    half_open_max_calls: positiveInt(json?.half_open_max_calls) ?? fallback.halfOpenMaxCalls,
    success_threshold: positiveInt(json?.success_threshold) ?? fallback.successThreshold,
    window: windowWireFrom(json?.window),
    backoff: backoffWireFrom(json?.backoff),
    forced_state: json?.forced_state === 'open' || json?.forced_state === 'closed' ? json.forced_state : null,
    throttle: throttleWireFrom(json?.throttle),
    ...kindsWireFrom(json),
    history: typeof json?.history === 'boolean' ? json.history : fallback.history !== false,
  });
  return {
    ...policy,
    window: json?.window === undefined ? fallback.window : policy.window,
    backoff: json?.backoff === undefined ? fallback.backoff : policy.backoff,
    throttle: json?.throttle === undefined ? fallback.throttle : policy.throttle,
  };
}

// Issue 29's settings (docs/api.md "Outcome kinds"): `count_as`, `min_deadline_ms`,
// `max_retry_after_seconds`, `throttle_scope` and `ramp`, flat beside the other fields. A policy
// that sets none has neither `kinds` nor `ramp` and shows none of them in its own wire form; a
// circuit's JSON shows all five, resolved (`kindsDisplay`).

/** `ramp` on the wire (issue 29); `start_percent` left out (or null) takes its default. */
export type RampWire = {
  readonly seconds: number;
  readonly start_percent?: number | null; // percent
};

/**
 * Issue 29's policy fields on the wire, flat beside the others. Each left out takes its default
 * (`POLICY_DEFAULTS.kinds`); `min_deadline_ms: null` is a value (a caller's deadline never counts).
 */
export type KindsWire = {
  readonly count_as?: Readonly<Partial<Record<OutcomeKind, CountAs>>> | null;
  readonly min_deadline_ms?: number | null; // ms
  readonly max_retry_after_seconds?: number | null; // seconds
  readonly throttle_scope?: 'circuit' | 'caller' | null;
  readonly ramp?: RampWire | null;
};

const COUNT_AS = new Set<unknown>(['success', 'failure', 'ignore']);

/** Issue 29's fields from a server's JSON, leniently: a malformed one is left out (its default). */
function kindsWireFrom(json: Readonly<Record<string, unknown>> | null): KindsWire {
  const out: { -readonly [K in keyof KindsWire]: KindsWire[K] } = {};
  const countAs = json?.count_as;
  if (isRecord(countAs))
    out.count_as = Object.fromEntries(
      Object.entries(countAs).filter(([kind, as]) => isOutcomeKind(kind) && COUNT_AS.has(as)),
    ) as KindsWire['count_as'];
  const min = json?.min_deadline_ms;
  if (min === null || (typeof min === 'number' && min > 0)) out.min_deadline_ms = min;
  const maxRetry = positiveInt(json?.max_retry_after_seconds);
  if (maxRetry !== undefined) out.max_retry_after_seconds = maxRetry;
  const scope = json?.throttle_scope;
  if (scope === 'circuit' || scope === 'caller') out.throttle_scope = scope;
  const ramp = json?.ramp;
  const seconds = isRecord(ramp) ? positiveInt(ramp.seconds) : undefined;
  if (isRecord(ramp) && seconds !== undefined) {
    const start = ramp.start_percent;
    out.ramp = { seconds, start_percent: typeof start === 'number' && start > 0 && start <= 100 ? start : null };
  }
  return out;
}

/** `kinds` and `ramp` from the wire, each only when set away from its default. */
export function kindsFromWire(w: KindsWire): Pick<CircuitPolicy, 'kinds' | 'ramp'> {
  const d = POLICY_DEFAULTS.kinds;
  const kinds: KindPolicy = {
    countAs: w.count_as ?? d.countAs,
    minDeadlineMs: w.min_deadline_ms === undefined ? d.minDeadlineMs : w.min_deadline_ms,
    maxRetryAfterSeconds: w.max_retry_after_seconds ?? d.maxRetryAfterSeconds,
    throttleScope: w.throttle_scope ?? d.throttleScope,
  };
  const ramp: RampPolicy | null =
    w.ramp == null
      ? null
      : { seconds: w.ramp.seconds, startPercent: w.ramp.start_percent ?? POLICY_DEFAULTS.ramp.startPercent };
  return { ...(isDefaultKinds(kinds) ? {} : { kinds }), ...(ramp === null ? {} : { ramp }) };
}

/** Issue 29's fields in wire form, only those set away from their defaults (a merge base, a policy's own form). */
export function kindsToWire(p: CircuitPolicy): KindsWire {
  const d = POLICY_DEFAULTS.kinds;
  const k = kindPolicy(p);
  const out: { -readonly [K in keyof KindsWire]: KindsWire[K] } = {};
  if (Object.keys(k.countAs).length > 0) out.count_as = k.countAs;
  if (k.minDeadlineMs !== d.minDeadlineMs) out.min_deadline_ms = k.minDeadlineMs;
  if (k.maxRetryAfterSeconds !== d.maxRetryAfterSeconds) out.max_retry_after_seconds = k.maxRetryAfterSeconds;
  if (k.throttleScope !== d.throttleScope) out.throttle_scope = k.throttleScope;
  if (p.ramp != null) out.ramp = { seconds: p.ramp.seconds, start_percent: p.ramp.startPercent };
  return out;
}

/** Issue 29's fields as a circuit's JSON shows them: every one, resolved (the throttle scope in force). */
export function kindsDisplay(p: CircuitPolicy): {
  count_as: Readonly<Partial<Record<OutcomeKind, CountAs>>>;
  min_deadline_ms: number | null;
  max_retry_after_seconds: number;
  throttle_scope: 'circuit' | 'caller';
  ramp: { seconds: number; start_percent: number } | null;
} {
  const k = kindPolicy(p);
  return {
    count_as: k.countAs,
    min_deadline_ms: k.minDeadlineMs,
    max_retry_after_seconds: k.maxRetryAfterSeconds,
    throttle_scope: throttleScope(p),
    ramp: p.ramp == null ? null : { seconds: p.ramp.seconds, start_percent: p.ramp.startPercent },
  };
}
