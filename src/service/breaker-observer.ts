import type { Circuit, Transition } from '../domain/circuit.js';
import type { OutcomeKind } from '../domain/outcome-kind.js';

/**
 * What the breaker service reports as it works (metrics count these). Optional: without
 * one the service does no extra work at all.
 */
export interface BreakerObserver {
  /** A state change, after it committed; `circuit` is the circuit after the step. */
  transition(circuit: Circuit, transition: Transition): void;
  /** An outcome was recorded, whatever the route; `durationMs` when the caller gave one, `kind` when it named one (issue 29). */
  outcome(circuit: Circuit, success: boolean, durationMs: number | undefined, kind?: OutcomeKind): void;
  /** A call was refused (open, half-open without a free probe slot, forced open). */
  rejected(circuit: Circuit): void;
}
