/**
 * A circuit's policy: the settings that decide when it opens, for how long, and how it
 * closes again. Pure data (it serialises to JSON and fits a database row); its snake_case
 * wire form is `policy-wire.ts`, its defaults `policy-defaults.ts`. The shape of every field
 * lives here, at the bottom of the domain; the rules each field drives live in their own file
 * (`window.ts`, `throttle.ts`, `quorum.ts`), which import this one and never the other way.
 */
import type { OutcomeKind } from './outcome-kind.js';
import { POLICY_DEFAULTS } from './policy-defaults.js';

/** The sliding window a circuit judges failure and slow-call rates over. */
export interface WindowPolicy {
  /** `count`: the last `size` outcomes; `time`: the outcomes of the last `size` seconds. */
  readonly type: 'count' | 'time';
  /** Outcomes (count, 1-10,000) or seconds (time, 1-3,600). */
  readonly size: number;
  /** Fewest outcomes in the window before a rate can open the circuit; null: the default (see `minimumCalls`). */
  readonly minimumCalls: number | null;
  /** Failure rate, in percent, at or above which the circuit opens. */
  readonly failureRateThreshold: number;
  /** An outcome at least this slow counts as a slow call; null: slow calls are not judged. */
  readonly slowCallDurationMs: number | null;
  /** Slow-call rate, in percent, at or above which the circuit opens. */
  readonly slowCallRateThreshold: number;
}

/** Open-time growth after each failed half-open probe (APISIX-style). */
export interface BackoffPolicy {
  /** The next open time is the previous one times this (> 1). */
  readonly multiplier: number;
  /** Cap on the open time, in seconds. */
  readonly maxTimeoutSeconds: number;
}

/** A circuit's throttle settings (`throttle: {k, window_seconds}` on the wire; null: off); the rule is `throttle.ts`. */
export interface ThrottlePolicy {
  /**
   * The SRE book's K (`throttle.ts`): requests may reach k times the accepts before any call is refused.
   * At least 1, so that a dependency that accepts every call is never throttled; lower
   * is more aggressive.
   */
  readonly k: number;
  /** Seconds of history the counts cover (the current second and the ones before it). */
  readonly windowSeconds: number;
}

/** Policy field `quorum` (the rule is `quorum.ts`); null (or absent) on a circuit: today's rules, no per-caller state. */
export interface QuorumPolicy {
  /** Distinct named callers (2-1,000) that must have failed in the window for a trip to open the circuit. */
  readonly minCallers: number;
  /** How far back a caller's last failure (or slow call) counts, in seconds. */
  readonly windowSeconds: number;
  /** Callers remembered per circuit (at most QUORUM_LIMITS' 1,000); past it the least recently seen is forgotten. */
  readonly maxCallers: number;
}

/** What an outcome of a kind counts as (policy field `count_as`, issue 29). */
export type CountAs = 'success' | 'failure' | 'ignore';

/**
 * How outcome kinds are judged (issue 29; the rules are `outcome-rules.ts`). On a circuit only
 * when a member differs from `POLICY_DEFAULTS.kinds`: circuits without one keep their shape.
 */
export interface KindPolicy {
  /** Overrides of the default table, kind -> what it counts as; `{}`: none. */
  readonly countAs: Readonly<Partial<Record<OutcomeKind, CountAs>>>;
  /** A caller's deadline at least this long (ms) gave the dependency a fair chance; null: never counts. */
  readonly minDeadlineMs: number | null;
  /** The longest cool-down a throttled outcome may ask for, in seconds (larger ones are capped). */
  readonly maxRetryAfterSeconds: number;
  /** Who cools down after a throttled outcome; null: `caller` with a quorum, else `circuit`. */
  readonly throttleScope: 'circuit' | 'caller' | null;
}

/** The shared slow start after a circuit closes from half-open or a cool-down ends (`ramp`; null: off). */
export interface RampPolicy {
  /** How long the share grows to 100 %. */
  readonly seconds: number;
  /** The share admitted when the ramp begins, in percent. */
  readonly startPercent: number;
}

/** An operator override: `open` refuses every call, `closed` admits every call. */
export type ForcedState = 'open' | 'closed';

/** Every per-circuit setting. */
export interface CircuitPolicy {
  /** Consecutive failures that open a closed circuit. */
  readonly failureThreshold: number;
  /** Base open time, in seconds. */
  readonly timeoutSeconds: number;
  /** Probes admitted at once while half-open. */
  readonly halfOpenMaxCalls: number;
  /** Successful probes in a row that close a half-open circuit. */
  readonly successThreshold: number;
  readonly window: WindowPolicy | null;
  readonly backoff: BackoffPolicy | null;
  readonly forcedState: ForcedState | null;
  /** Soft throttling while closed (`throttle.ts`); null: off. */
  readonly throttle: ThrottlePolicy | null;
  /** Open for everyone only on evidence from several callers (quorum.ts); null or absent: today's rules. */
  readonly quorum?: QuorumPolicy | null;
  /** Outcome kinds' rules (issue 29); null or absent: the defaults. */
  readonly kinds?: KindPolicy | null;
  /** The shared slow start (issue 29); null or absent: off. */
  readonly ramp?: RampPolicy | null;
  /**
   * Whether this circuit's outcomes are kept in its history (issue 31, config `history`):
   * absent (or true) on; `false` only when turned off, so circuits that keep it keep their shape.
   */
  readonly history?: boolean;
}

/** The three settings every caller names; the rest default as in `POLICY_DEFAULTS.circuit`. */
export type CircuitSettings = Pick<CircuitPolicy, 'failureThreshold' | 'timeoutSeconds' | 'halfOpenMaxCalls'> &
  Partial<CircuitPolicy>;

/** The built-in policy, checked to be a whole `CircuitPolicy` here (`policy-defaults.ts` sits below this file). */
const DEFAULT_POLICY: CircuitPolicy = POLICY_DEFAULTS.circuit;

/** Settings completed with the defaults. */
export function resolvePolicy(settings: CircuitSettings): CircuitPolicy {
  return {
    failureThreshold: settings.failureThreshold,
    timeoutSeconds: settings.timeoutSeconds,
    halfOpenMaxCalls: settings.halfOpenMaxCalls,
    successThreshold: settings.successThreshold ?? DEFAULT_POLICY.successThreshold,
    window: settings.window ?? null,
    backoff: settings.backoff ?? null,
    forcedState: settings.forcedState ?? null,
    throttle: settings.throttle ?? null,
    // Only when set: circuits without one keep the shape they always had.
    ...(settings.quorum == null ? {} : { quorum: settings.quorum }),
    ...optionalIssue29(settings),
    ...historyOff(settings),
  };
}

/** `history: false` when the history is turned off, else nothing (absent is on: issue 31). */
export function historyOff(p: Partial<CircuitPolicy>): Pick<CircuitPolicy, 'history'> {
  return p.history === false ? { history: false } : {};
}

/** `kinds` (unless all defaults) and `ramp`, only when set: circuits without them keep their shape. */
function optionalIssue29(p: Partial<CircuitPolicy>): Partial<CircuitPolicy> {
  const kinds = p.kinds == null || isDefaultKinds(p.kinds) ? undefined : p.kinds;
  if (kinds === undefined && p.ramp == null) return {};
  return { ...(kinds === undefined ? {} : { kinds }), ...(p.ramp == null ? {} : { ramp: p.ramp }) };
}

/** Whether every member of `k` is its default (then a circuit leaves `kinds` out). */
export function isDefaultKinds(k: KindPolicy): boolean {
  const d = POLICY_DEFAULTS.kinds;
  return (
    Object.keys(k.countAs).length === 0 &&
    k.minDeadlineMs === d.minDeadlineMs &&
    k.maxRetryAfterSeconds === d.maxRetryAfterSeconds &&
    k.throttleScope === d.throttleScope
  );
}

/** Field-by-field equality (null and undefined are the defaults / no ramp). */
export function sameKinds(a: KindPolicy | null | undefined, b: KindPolicy | null | undefined): boolean {
  const x: KindPolicy = a ?? POLICY_DEFAULTS.kinds;
  const y: KindPolicy = b ?? POLICY_DEFAULTS.kinds;
  const keys = Object.keys(x.countAs) as OutcomeKind[];
  return (
    keys.length === Object.keys(y.countAs).length &&
    keys.every((k) => x.countAs[k] === y.countAs[k]) &&
    x.minDeadlineMs === y.minDeadlineMs &&
    x.maxRetryAfterSeconds === y.maxRetryAfterSeconds &&
    x.throttleScope === y.throttleScope
  );
}

export function sameRamp(a: RampPolicy | null | undefined, b: RampPolicy | null | undefined): boolean {
  if (a == null || b == null) return (a ?? null) === (b ?? null);
  return a.seconds === b.seconds && a.startPercent === b.startPercent;
}

/** The window's minimum number of calls, with its default resolved. */
export function minimumCalls(window: WindowPolicy): number {
  return window.minimumCalls ?? (window.type === 'count' ? window.size : POLICY_DEFAULTS.window.timeMinimumCalls);
}

/** Field-by-field equality of two windows (null equals null). */
export function sameWindow(a: WindowPolicy | null, b: WindowPolicy | null): boolean {
  if (a === null || b === null) return a === b;
  return (
    a.type === b.type &&
    a.size === b.size &&
    a.minimumCalls === b.minimumCalls &&
    a.failureRateThreshold === b.failureRateThreshold &&
    a.slowCallDurationMs === b.slowCallDurationMs &&
    a.slowCallRateThreshold === b.slowCallRateThreshold
  );
}

function sameBackoff(a: BackoffPolicy | null, b: BackoffPolicy | null): boolean {
  if (a === null || b === null) return a === b;
  return a.multiplier === b.multiplier && a.maxTimeoutSeconds === b.maxTimeoutSeconds;
}

/** Field-by-field equality (null equals null). */
export function sameThrottle(a: ThrottlePolicy | null, b: ThrottlePolicy | null): boolean {
  if (a === null || b === null) return a === b;
  return a.k === b.k && a.windowSeconds === b.windowSeconds;
}

/** Field-by-field equality (null and undefined are no quorum). */
export function sameQuorum(a: QuorumPolicy | null | undefined, b: QuorumPolicy | null | undefined): boolean {
  if (a == null || b == null) return (a ?? null) === (b ?? null);
  return a.minCallers === b.minCallers && a.windowSeconds === b.windowSeconds && a.maxCallers === b.maxCallers;
}

/** Whether two policies are equal in every field. */
export function samePolicy(a: CircuitPolicy, b: CircuitPolicy): boolean {
  return (
    a.failureThreshold === b.failureThreshold &&
    a.timeoutSeconds === b.timeoutSeconds &&
    a.halfOpenMaxCalls === b.halfOpenMaxCalls &&
    a.successThreshold === b.successThreshold &&
    a.forcedState === b.forcedState &&
    sameWindow(a.window, b.window) &&
    sameBackoff(a.backoff, b.backoff) &&
    sameThrottle(a.throttle, b.throttle) &&
    sameQuorum(a.quorum, b.quorum) &&
    sameKinds(a.kinds, b.kinds) &&
    sameRamp(a.ramp, b.ramp) &&
    (a.history !== false) === (b.history !== false)
  );
}

/** The policy fields of a circuit (or any object carrying them). */
export function policyOf(p: CircuitPolicy): CircuitPolicy {
  return {
    failureThreshold: p.failureThreshold,
    timeoutSeconds: p.timeoutSeconds,
    halfOpenMaxCalls: p.halfOpenMaxCalls,
    successThreshold: p.successThreshold,
    window: p.window,
    backoff: p.backoff,
    forcedState: p.forcedState,
    throttle: p.throttle,
    ...(p.quorum == null ? {} : { quorum: p.quorum }),
    ...optionalIssue29(p),
    ...historyOff(p),
  };
}

/** The open time after a failed probe: the previous one grown by the backoff, capped; whole seconds. */
export function nextOpenTimeoutSeconds(policy: CircuitPolicy, previousSeconds: number): number {
  if (policy.backoff === null) return policy.timeoutSeconds;
  const grown = Math.ceil(previousSeconds * policy.backoff.multiplier);
  return Math.min(grown, Math.max(policy.backoff.maxTimeoutSeconds, policy.timeoutSeconds));
}
