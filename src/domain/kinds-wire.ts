/**
 * Issue 29's policy settings on the wire (docs/api.md "Outcome kinds"): `count_as`,
 * `min_deadline_ms`, `max_retry_after_seconds`, `throttle_scope` and `ramp`, flat beside the
 * other policy fields, mapped to the domain's `kinds` and `ramp` and back. A policy that sets
 * none has neither member and shows none of them in its own wire form; a circuit's JSON shows
 * all five, resolved (`kindsDisplay`).
 */
import type { OutcomeKind } from './outcome-kind.js';
import { POLICY_DEFAULTS } from './policy-defaults.js';
import {
  isDefaultKinds,
  kindPolicy,
  throttleScope,
  type CircuitPolicy,
  type CountAs,
  type KindPolicy,
  type RampPolicy,
} from './policy.js';

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
