/**
 * The breaker's data: a circuit (its policy, flat, and its run-time state), the events that
 * can happen to it, and what a step answers. Plain serialisable data, documented once here;
 * `circuit.ts` holds the pure functions over it.
 */
import type { OutcomeKind } from './outcome-kind.js';
import type { CircuitPolicy } from './policy.js';
import type { ThrottleState } from './throttle.js';
import type { WindowState } from './window.js';

export type CircuitState = 'closed' | 'open' | 'half_open';

/** Epoch milliseconds. */
export type EpochMs = number;

/** A named circuit: its policy (flat) and its run-time state. */
export interface Circuit extends CircuitPolicy {
  readonly id: number; // 0 until the store has inserted it
  readonly name: string;
  /** The state by the rules, whatever `forcedState` says. */
  readonly state: CircuitState;
  /** Consecutive failures while closed (late failures while open add to it). */
  readonly failureCount: number;
  /** Expiry times of the probe leases handed out while half-open, oldest first. */
  readonly probeLeases: readonly EpochMs[];
  /** Successful probes in a row while half-open. */
  readonly probeSuccesses: number;
  readonly openUntil: EpochMs | null;
  /** The open time in force, in seconds, set at each opening; null while closed. */
  readonly openTimeoutSeconds: number | null;
  /** Re-openings in a row (after failed probes); 0 when closed and on a first opening. */
  readonly reopenCount: number;
  /** Outcomes in the window; null when empty (emptied on every state change). */
  readonly windowState: WindowState | null;
  /** Soft throttling's requests and accepts while closed (`throttle.ts`); null when empty (emptied on every state change). */
  readonly throttleState: ThrottleState | null;
  readonly halfOpenAt: EpochMs | null;
  readonly lastFailureAt: EpochMs | null;
  /**
   * When this service applied the last state change (null: none since creation): an
   * outcome whose call ended before it is stale. Unlike a transition's stamp (open ->
   * half-open is stamped at `openUntil`), this is the moment the change was written.
   * Missing (undefined) on circuits stored before it existed: then only the window rule applies.
   */
  readonly stateChangedAt?: EpochMs | null;
  /** With a quorum: what it keeps per named caller (caller-state.ts); absent or empty: none. */
  readonly callers?: readonly CallerEntry[];
  /** The circuit-wide cool-down's end (issue 29, `outcome-rules.ts`); absent or null: none. */
  readonly coolUntil?: EpochMs | null;
  /** Caller-scope cool-downs in force, `[caller, until]`, soonest end first; absent or null: none. */
  readonly coolCallers?: readonly CoolCaller[] | null;
  /** The soonest end of any cool-down (circuit or caller): when one is due to end; absent or null: none. */
  readonly coolDueAt?: EpochMs | null;
  /** The end of the shared slow start (`ramp`); absent or null: not ramping. */
  readonly rampUntil?: EpochMs | null;
  /** A second policy run beside this one on every outcome, without acting on it (issue 31, `shadow.ts`); absent or null: none. */
  readonly shadow?: Shadow | null;
  /**
   * The highest outcome number applied per source (issue 32, `outcome-source.ts`): `[source, seq,
   * when]`, the most recent first; absent or null: none.
   */
  readonly sources?: readonly SourceMark[] | null;
  readonly createdAt: EpochMs;
  readonly updatedAt: EpochMs;
}

/**
 * A shadow policy and its own run-time state (issue 31; the rules are `shadow.ts`): a circuit of
 * its own, never forced, that the same pure functions run on the live circuit's outcomes.
 */
export interface Shadow {
  /** The shadow's circuit: its policy (flat) and state; its `shadow` is always absent. */
  readonly circuit: Circuit;
  /** Outcomes fed to it. */
  readonly outcomes: number;
  /** Outcomes that arrived while it refused calls: counted, not fed (the call would not have been made). */
  readonly refused: number;
  /** Its openings (a state change to open). */
  readonly openings: number;
  /** When it was set. */
  readonly since: EpochMs;
}

/** A caller-scope cool-down in force: the caller and when it ends. */
export type CoolCaller = readonly [caller: string, until: EpochMs];

/**
 * One caller of a circuit with a quorum, as stored (`callers`; its rules are `caller-state.ts`):
 * a tuple to keep the row small (about 60 bytes plus the id in JSON). Times are epoch ms, null
 * for none; `isolatedUntil` null: not isolated. `voter` (issue 30): the credential that last
 * reported for this caller, so a quorum counts credentials, not names; absent when no named
 * credential reported (no credentials configured): the caller counts as its own voter.
 */
export type CallerEntry = readonly [...CallerCounts, voter?: string];

/** A caller entry's members without its voter. */
export type CallerCounts = readonly [
  caller: string,
  failures: number,
  failedAt: EpochMs | null,
  slowAt: EpochMs | null,
  isolatedUntil: EpochMs | null,
  isolatedSeconds: number,
  probeUntil: EpochMs | null,
];

export type TransitionReason =
  | 'failure_threshold_reached'
  | 'failure_rate_exceeded'
  | 'slow_call_rate_exceeded'
  | 'probe_failed'
  | 'open_timeout_elapsed'
  | 'probe_succeeded'
  | 'success_recorded'
  | 'manual_reset'
  | 'forced_open'
  | 'forced_closed'
  | 'force_cleared'
  | 'trip_withheld'
  | 'caller_isolated'
  | 'caller_released'
  /** A proxy node's trip withheld by its upstream's `max_ejection_percent` (closed -> closed). */
  | 'ejection_capped'
  /** A throttled outcome started (or extended) a cool-down (issue 29; the state is kept). */
  | 'cool_down'
  /** A cool-down's time ran out (stamped at its end; the state is kept). */
  | 'cool_down_ended';

/** The rules that open a closed circuit. */
export type TripReason = 'failure_threshold_reached' | 'failure_rate_exceeded' | 'slow_call_rate_exceeded';

/**
 * A state change, or an event that keeps the state (then `from` and `to` are equal): a
 * force set or cleared, a trip withheld for want of a quorum, a caller isolated or released.
 */
export interface Transition {
  readonly from: CircuitState;
  readonly to: CircuitState;
  readonly reason: TransitionReason;
  readonly at: EpochMs;
  /** trip_withheld and a quorum's opening: the named callers that failed in the window; caller_*: the caller. */
  readonly callers?: readonly string[];
  /** trip_withheld: the rule that fired. */
  readonly rule?: TripReason;
  /** caller_isolated: when the caller's open time ends. */
  readonly until?: EpochMs;
  /** Made while the circuit was forced closed: what the rules would have done (detect-only). */
  readonly forcedState?: 'closed';
  /** cool_down, cool_down_ended: who cools down. */
  readonly scope?: 'circuit' | 'caller';
  /** cool_down: the seconds the cool-down lasts (the dependency's ask, capped). */
  readonly retryAfterSeconds?: number;
  /** cool_down_ended (circuit scope) and half_open -> closed, when the policy ramps: the end of the slow start. */
  readonly rampUntil?: EpochMs;
  /** A manual transition (forced_*, force_cleared, manual_reset): the credential id that made it (issue 30). */
  readonly by?: string;
  /** A transition of the circuit's shadow policy (issue 31): the live circuit did not change. */
  readonly shadow?: true;
}

/** What a step did: the circuit after it and the state changes it made, in order. */
/** A source's mark on a circuit (`outcome-source.ts`): its id, the highest outcome number applied, and when. */
export type SourceMark = readonly [source: string, seq: number, at: EpochMs];

export interface Step {
  readonly circuit: Circuit;
  readonly transitions: readonly Transition[];
}

/** Settings that apply to every circuit at every step. */
export interface BreakerPolicy {
  /** How long an admitted half-open probe holds its slot without reporting. */
  readonly probeLeaseMs: number;
}

/**
 * How an outcome reported while the circuit is open is treated. `circuitlog` (its own
 * routes): a success closes, a failure extends the open time. `count_only` (a late
 * outcome of a call admitted before the circuit opened): counted, no state change.
 */
export type LateOutcomeRule = 'circuitlog' | 'count_only';

/** The outcome of one call. */
export interface Outcome {
  readonly success: boolean;
  /** How long the call took; judged against the window's slow-call duration. */
  readonly durationMs?: number;
  /**
   * circuitlog's per-failure open time: the open time of the opening this failure causes
   * (as circuitlog's `recordFailure($name, $now, $timeoutSeconds)`); never stored as policy.
   */
  readonly timeoutSeconds?: number;
  /** Default `circuitlog`. */
  readonly late?: LateOutcomeRule;
  /**
   * When the call ended, by the caller's clock. An outcome that ended before the circuit's
   * last state change (less `STALE_TOLERANCE_MS`), or before its time window, is stale:
   * counted by observers, no change to the circuit at all.
   */
  readonly at?: EpochMs;
  /** Who made the call (caller.ts rules); absent: anonymous, never counted toward a quorum. */
  readonly caller?: string;
  /**
   * The credential that reported it (issue 30: its id), when credentials are on: a quorum counts
   * distinct voters, so one credential reporting as many callers is one vote. Absent: the caller
   * is its own voter (today's rule).
   */
  readonly voter?: string;
  /** Why the call ended (issue 29); absent: `success` or `failure` by `success`. When set it decides, not `success`. */
  readonly kind?: OutcomeKind;
  /** `throttled`: the seconds the dependency asked for (absent or null: the circuit's `timeoutSeconds`). */
  readonly retryAfterSeconds?: number | null;
  /** `caller_deadline`: the caller's deadline, in ms. */
  readonly deadlineMs?: number;
}

/** What the rules would have answered under a forced-closed circuit (detect-only). */
export interface WouldRefuse {
  readonly retryAt: EpochMs;
  /** `caller`: the asking caller is isolated; `circuit`: the circuit is refusing everyone. */
  readonly scope: 'circuit' | 'caller';
  /** The state by the rules. */
  readonly state: CircuitState;
}

export type Verdict =
  | { readonly allowed: true; readonly wouldRefuse?: WouldRefuse; readonly rampPercent?: number }
  | {
      readonly allowed: false;
      readonly retryAt: EpochMs;
      readonly forced?: true;
      readonly scope?: 'caller';
      readonly throttled?: ThrottledVerdict;
      /** A cool-down refused the call (issue 29). */
      readonly cooled?: CooledVerdict;
      /** The slow start refused the call (issue 29). */
      readonly ramping?: RampingVerdict;
    };

/** A cool-down refused the call: its scope and end (the verdict's `retryAt`). */
export interface CooledVerdict {
  readonly scope: 'circuit' | 'caller';
}

/** The slow start refused the call: the share admitted now, and the ramp's end. */
export interface RampingVerdict {
  readonly percent: number;
  readonly until: EpochMs;
}

/** A closed circuit's soft throttle refused the call (`throttle.ts`): drawn against `probability`. */
export interface ThrottledVerdict {
  readonly probability: number;
}

export interface Admission extends Step {
  readonly verdict: Verdict;
}

export interface FailureOptions {
  /** Open time of the opening this failure causes; the circuit's `timeoutSeconds` is unchanged. */
  readonly timeoutSeconds?: number;
}
