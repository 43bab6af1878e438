import type { Logger } from 'pino';
import {
  admit,
  newCircuit,
  recordFailure,
  recordSuccess,
  refresh,
  reset,
  type Admission,
  type BreakerPolicy,
  type Circuit,
  type CircuitSettings,
  type CircuitState,
  type Step,
  type Transition,
} from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';
import type { CircuitStore } from '../store/circuit-store.js';
import type { BreakerObserver } from './breaker-observer.js';

/** Epoch milliseconds now; tests pass a fake. */
export type Clock = () => number;

export interface OutcomeOptions {
  /** Settings used only if this call creates the circuit. */
  readonly create?: Partial<CircuitSettings>;
  readonly timeoutSeconds?: number;
  /** How long the call took, when the caller says (metrics histogram, slow calls). */
  readonly durationMs?: number;
}

/**
 * The breaker use cases: each one is a pure step from `domain/` run through the
 * store's atomic read-modify-write, with one log line per state transition.
 */
export class BreakerService {
  constructor(
    private readonly store: CircuitStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    readonly defaults: CircuitSettings,
    private readonly policy: BreakerPolicy,
    private readonly observer?: BreakerObserver,
  ) {}

  now(): number {
    return this.clock();
  }

  /** The circuit after the lazy open -> half-open transition, or null if unknown. */
  get(name: string): Circuit | null {
    const now = this.clock();
    return this.run(name, (c) => (c === null ? null : refresh(c, now)))?.circuit ?? null;
  }

  /**
   * May a call go ahead? Unknown circuits are closed and allowed (and not created).
   * In half-open an admitted call takes a probe slot.
   */
  check(name: string): Admission | null {
    const now = this.clock();
    const admission = this.run(name, (c) => (c === null ? null : admit(c, now, this.policy)));
    if (admission?.verdict.allowed === false) this.observer?.rejected(admission.circuit);
    return admission;
  }

  /** Record an outcome, creating the circuit with defaults (or `options.create`) if missing. */
  record(name: string, success: boolean, options: OutcomeOptions = {}): Circuit {
    const now = this.clock();
    // A new circuit is written even when the outcome changes nothing: the store writes
    // whenever the step's circuit is not the one it read, and it read none.
    const step = this.run(name, (current) => {
      const c = current ?? newCircuit(name, { ...this.defaults, ...options.create }, now);
      return success ? recordSuccess(c, now) : recordFailure(c, now, { timeoutSeconds: options.timeoutSeconds });
    });
    this.observer?.outcome(step!.circuit, success, options.durationMs);
    return step!.circuit;
  }

  /**
   * The circuitlog `call`: refuse with CIRCUIT_OPEN when not allowed, else record the
   * outcome; the check and the record are one atomic step.
   */
  call(name: string, success: boolean, options: OutcomeOptions = {}): Circuit {
    const now = this.clock();
    const step = this.run(name, (current) => {
      const c = current ?? newCircuit(name, { ...this.defaults, ...options.create }, now);
      const admission = admit(c, now, this.policy);
      if (!admission.verdict.allowed) return admission;
      const next = success
        ? recordSuccess(admission.circuit, now)
        : recordFailure(admission.circuit, now, { timeoutSeconds: options.timeoutSeconds });
      return { circuit: next.circuit, transitions: [...admission.transitions, ...next.transitions], verdict: admission.verdict };
    })!;
    if (!step.verdict.allowed) {
      this.observer?.rejected(step.circuit);
      throw this.openError(step.circuit, step.verdict.retryAt);
    }
    this.observer?.outcome(step.circuit, success, options.durationMs);
    return step.circuit;
  }

  /** Close the circuit; null if unknown. */
  reset(name: string): Circuit | null {
    const now = this.clock();
    return this.run(name, (c) => (c === null ? null : reset(c, now)))?.circuit ?? null;
  }

  list(query: { state?: CircuitState; afterId?: number; limit: number }): Circuit[] {
    // Lazy transitions first, so a state filter sees what a GET of each circuit would.
    for (const name of this.store.findExpiredOpen(this.clock())) this.get(name);
    return this.store.list(query);
  }

  events(name: string, limit: number): Transition[] | null {
    const circuit = this.store.find(name);
    return circuit === null ? null : this.store.events(circuit.id, limit);
  }

  /** The CIRCUIT_OPEN error for a refused call. */
  openError(circuit: Circuit, retryAt: number): AppError {
    const detail =
      circuit.state === 'open'
        ? `Circuit '${circuit.name}' is open; calls are refused until ${new Date(retryAt).toISOString()}.`
        : `Circuit '${circuit.name}' is half-open and all ${circuit.halfOpenMaxCalls} probe slot(s) are taken.`;
    return new AppError('CIRCUIT_OPEN', detail, {
      retryAt,
      extensions: {
        circuit: circuit.name,
        state: circuit.state,
        open_until: circuit.openUntil === null ? null : new Date(circuit.openUntil).toISOString(),
      },
    });
  }

  private run<S extends Step>(name: string, step: (current: Circuit | null) => S | null): S | null {
    const result = this.store.apply(name, step);
    if (result !== null) {
      for (const t of result.transitions) {
        this.logger.info(
          {
            event: 'transition',
            circuit: name,
            from: t.from,
            to: t.to,
            reason: t.reason,
            failure_count: result.circuit.failureCount,
            open_until: result.circuit.openUntil === null ? null : new Date(result.circuit.openUntil).toISOString(),
          },
          `circuit ${name}: ${t.from} -> ${t.to} (${t.reason})`,
        );
        this.observer?.transition(result.circuit, t);
      }
    }
    return result;
  }
}
