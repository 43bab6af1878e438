/**
 * The types of `clients/spec/state-machine.json` (documented in clients/spec/README.md):
 * snake_case wire form, as a client in any language reads it.
 */
import type { OutcomeKind } from '../../../src/domain/outcome-kind.js';
import type { PolicyWire } from '../../../src/domain/policy-wire.js';

export type WireState = 'closed' | 'open' | 'half_open';

/** `count_only`: the rule of `POST /outcomes` (what clients use); `circuitlog`: of `/success`, `/failure`, `/call`. */
export type OutcomeRule = 'count_only' | 'circuitlog';

export type WireEvent =
  | {
      readonly type: 'admit';
      /** The uniform random number in [0, 1) a throttled circuit draws (vectors with a `throttle` only). */
      readonly draw?: number;
      /** The asking caller (`?caller=`; `quorum` and caller-scope `cool_down` vectors). */
      readonly caller?: string;
      /** The uniform random number in [0, 1) a ramping circuit draws (`ramp` vectors only; `rampAdmits`). */
      readonly random?: number;
    }
  | {
      readonly type: 'outcome';
      /** Absent when `kind` is given (the clients send a kind without `success`). */
      readonly success?: boolean;
      /** Why the call ended (issue 29); absent: `success` or `failure` by `success`. */
      readonly kind?: OutcomeKind;
      /** `throttled` only: the seconds the dependency asked for (absent: none named). */
      readonly retry_after_seconds?: number;
      /** `caller_deadline` only: the caller's deadline, in ms. */
      readonly deadline_ms?: number;
      readonly duration_ms?: number;
      /** circuitlog's per-failure open time (only in `circuitlog` vectors). */
      readonly timeout_seconds?: number;
      /** When the call ended, by the caller's clock (`POST /outcomes` `at`); absent: not sent. */
      readonly ended_at_ms?: number;
      /** Who made the call (`caller`; `quorum` vectors only): counted toward a quorum and its own isolation. */
      readonly caller?: string;
    }
  | { readonly type: 'reset' }
  | { readonly type: 'configure'; readonly policy: PolicyWire };

export type WireVerdict =
  | { readonly allowed: true; readonly ramp_percent?: number }
  | {
      readonly allowed: false;
      readonly retry_at_ms: number;
      readonly forced: boolean;
      readonly scope?: 'caller';
      readonly throttled?: true;
      /** Refused by the dependency's cool-down, the circuit's or the asking caller's (`retry_at_ms`: its end). */
      readonly cool_down?: 'circuit' | 'caller';
      /** Refused by the slow start: the share admitted now, in percent, and the ramp's end. */
      readonly ramp_percent?: number;
      readonly ramp_until_ms?: number;
    };

export interface WireTransition {
  readonly from: WireState;
  readonly to: WireState;
  readonly reason: string;
  /** The transition's own time (may be earlier than the step: open -> half-open is stamped at open_until). */
  readonly at_ms: number;
  /** `cool_down`, `cool_down_ended`: whose cool-down (`circuit`, or the `callers` named). */
  readonly scope?: 'circuit' | 'caller';
  /** `cool_down`, `cool_down_ended` in caller scope: the caller. */
  readonly callers?: readonly string[];
  /** `cool_down`: when it ends. */
  readonly until_ms?: number;
  /** `cool_down`: its length in seconds (the dependency's ask, capped; `timeout_seconds` when none). */
  readonly retry_after_seconds?: number;
  /** A circuit-wide `cool_down_ended` and a `half_open -> closed` under a policy that ramps: the ramp's end. */
  readonly ramp_until_ms?: number;
}

/** Issue 29's figures as of `at_ms`, as the circuit's JSON shows them (`GET /circuits/{name}`), in ms. */
export interface CoolingExpect {
  /** The circuit-wide cool-down's end while in force, else null. */
  readonly cool_until_ms: number | null;
  /** The caller-scope cool-downs in force, soonest end first. */
  readonly cooling_callers: readonly { readonly caller: string; readonly cool_until_ms: number }[];
  /** The slow start's end while ramping (closed, before it), else null. */
  readonly ramp_until_ms: number | null;
  /** The share admitted now, in percent (unrounded); 100 when not ramping. */
  readonly ramp_percent: number;
}

/**
 * The breaker after a step, at the step's `at_ms`. The `CoolingExpect` members are given in the
 * vectors of outcome kinds, cool-downs and the ramp (tags `kinds`, `cool_down`, `ramp`) only.
 */
export interface Expect extends Partial<CoolingExpect> {
  readonly state: WireState;
  readonly failure_count: number;
  readonly probe_successes: number;
  readonly probes_in_flight: number;
  readonly reopen_count: number;
  readonly timeout_seconds: number;
  readonly effective_timeout_seconds: number;
  readonly open_until_ms: number | null;
  readonly window: { readonly calls: number; readonly failures: number; readonly slow_calls: number } | null;
  /** Vectors with a `throttle` only: its counts and refusal probability as of `at_ms`. */
  readonly throttle?: { readonly requests: number; readonly accepts: number; readonly probability: number };
  readonly transitions: readonly WireTransition[];
  readonly verdict: WireVerdict;
}

export interface Step {
  readonly at_ms: number;
  readonly event: WireEvent;
  readonly expect: Expect;
}

export interface Vector {
  readonly id: string;
  readonly tags: readonly string[];
  readonly description: string;
  readonly outcome_rule: OutcomeRule;
  readonly probe_lease_ms: number;
  readonly created_at_ms: number;
  readonly policy: PolicyWire;
  readonly steps: readonly Step[];
}

export interface StateMachineSpec {
  readonly format: 'circuitlog-state-machine';
  readonly version: 2;
  readonly generated_by: string;
  readonly vectors: readonly Vector[];
}

export type { PolicyWire };
