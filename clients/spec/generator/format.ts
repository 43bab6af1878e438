/**
 * The types of `clients/spec/state-machine.json` (documented in clients/spec/README.md):
 * snake_case wire form, as a client in any language reads it.
 */
import type { PolicyWire } from '../../../src/domain/policy-wire.js';

export type WireState = 'closed' | 'open' | 'half_open';

/** `count_only`: the rule of `POST /outcomes` (what clients use); `circuitlog`: of `/success`, `/failure`, `/call`. */
export type OutcomeRule = 'count_only' | 'circuitlog';

export type WireEvent =
  | {
      readonly type: 'admit';
      /** The uniform random number in [0, 1) a throttled circuit draws (vectors with a `throttle` only). */
      readonly draw?: number;
      /** The asking caller (`?caller=`; `quorum` vectors only). */
      readonly caller?: string;
    }
  | {
      readonly type: 'outcome';
      readonly success: boolean;
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
  | { readonly allowed: true }
  | {
      readonly allowed: false;
      readonly retry_at_ms: number;
      readonly forced: boolean;
      readonly scope?: 'caller';
      readonly throttled?: true;
    };

export interface WireTransition {
  readonly from: WireState;
  readonly to: WireState;
  readonly reason: string;
  /** The transition's own time (may be earlier than the step: open -> half-open is stamped at open_until). */
  readonly at_ms: number;
}

/** The breaker after a step, at the step's `at_ms`. */
export interface Expect {
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
  readonly version: 1;
  readonly generated_by: string;
  readonly vectors: readonly Vector[];
}

export type { PolicyWire };
