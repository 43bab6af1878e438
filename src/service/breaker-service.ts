import { admit, type Admission, type Circuit, type Outcome, type Verdict } from '../domain/circuit.js';
import type { AppError } from '../domain/errors.js';
import type { CircuitSettings } from '../domain/policy.js';
import { drawOnce } from '../domain/throttle.js';
import { isPromise, chain } from '../store/maybe-promise.js';
import type { ServiceItem } from './breaker-core.js';
import { BreakerAdmin } from './breaker-admin.js';
import { guardedItems, type OutcomeGuard } from './guarded-outcome.js';
import { openError, type OpenErrorOptions } from './open-error.js';
import { callerOpenError } from './caller-refusal.js';

export type { Clock, ServiceLimits } from './breaker-core.js';

export interface OutcomeOptions {
  /** Settings used only if this call creates the circuit. */
  readonly create?: Partial<CircuitSettings>;
  readonly timeoutSeconds?: number;
  /** How long the call took; judged against a window's slow-call duration. */
  readonly durationMs?: number;
  /** Who made the call (domain/caller.ts): counted toward a quorum and the caller's own isolation. */
  readonly caller?: string;
}

/** The outcome of `options`, naming its caller only when it has one (the proxy's hot path allocates nothing more). */
function outcomeOf(success: boolean, options: OutcomeOptions, durationMs?: number): Outcome {
  const { timeoutSeconds, caller } = options;
  return caller === undefined
    ? { success, timeoutSeconds, durationMs }
    : { success, timeoutSeconds, durationMs, caller };
}

/** One outcome of a batch. */
export interface BatchOutcome extends Outcome {
  readonly name: string;
}

/**
 * May a call go ahead: the admission, or null for a circuit never recorded (closed by
 * definition, allowed, and not created).
 */
export type Decision = Admission | null;

/**
 * The breaker use cases: each one is a pure step from `domain/` run through the store's
 * atomic read-modify-write. Every stored result, single or group-committed, passes
 * through `settle` (one log line per transition; the one hook for observers). The
 * value-or-promise of the store (`maybe-promise.ts`) stops here: callers get a promise,
 * except `peekAllowed`, the synchronous fast path of `GET /allowed` and the proxy's pick
 * (a closed circuit answers from memory, no microtask). The direct methods (`get`,
 * `allowed`, `record`) serve the proxy; the HTTP routes record through the
 * group-committed `*Grouped` methods.
 */
export class BreakerService extends BreakerAdmin {
  private lastRecordWarning = -Infinity;

  now(): number {
    return this.clock();
  }

  /**
   * May a call go ahead, answered now when it needs no write and the store holds the circuit
   * in memory (SQLite always; Redis from its cache); `undefined` means ask `allowed`.
   * A refusal answered here is reported to the observer as `allowed` would.
   */
  peekAllowed(name: string, caller?: string): Decision | undefined {
    const current = this.store.peek(name);
    if (current === undefined) return undefined;
    if (current === null) return null;
    // A throttle that must draw (p > 0) is `allowed`'s work too: one draw per call, made
    // inside the store's step (a refusal is a write), never here and again there.
    let mustDraw = false;
    const admission = admit(current, this.clock(), this.policy, caller, () => {
      mustDraw = true;
      return 1; // admits; the answer is not used
    });
    // Taking a probe slot or moving to half-open is a write: that is `allowed`'s work.
    if (mustDraw || admission.circuit !== current) return undefined;
    return this.settle(name, admission);
  }

  /**
   * May a call go ahead? Unknown circuits are closed and allowed (and not created).
   * In half-open an admitted call takes a probe slot.
   */
  async allowed(name: string, caller?: string): Promise<Decision> {
    const now = this.clock();
    const random = drawOnce(this.random); // one admission, one draw, however often the store runs the step
    return this.run(name, (c) => (c === null ? null : admit(c, now, this.policy, caller, random)));
  }

  /**
   * Record an outcome (circuitlog's rules), creating the circuit with defaults (or `options.create`) if missing.
   * The proxy fires and forgets: a write that fails later (storage down) is logged here, never an
   * unhandled rejection; one that fails at once (SQLite busy) throws, as the store did.
   */
  record(
    name: string,
    success: boolean,
    options: OutcomeOptions = {},
    durationMs = options.durationMs,
  ): Promise<Circuit> {
    // `durationMs` apart from `options`: the proxy passes a shared options object and a per-call number (no allocation).
    const outcome = outcomeOf(success, options, durationMs);
    const result = chain(
      this.run(name, this.outcomeStep(name, outcome, options.create), outcome),
      (step) => step!.circuit,
    );
    if (!isPromise(result)) return Promise.resolve(result);
    result.catch((error: unknown) => this.warnNotRecorded(name, success, error));
    return result;
  }

  /**
   * `record` for a caller that does not wait for the circuit (the proxy's success path): the
   * same write, log lines and observer calls, without the promise of its result. A write that
   * fails later is logged as `record` logs it; one that fails at once throws.
   */
  recordDetached(name: string, success: boolean, options: OutcomeOptions, durationMs: number | undefined): void {
    const outcome = outcomeOf(success, options, durationMs);
    const result = this.run(name, this.outcomeStep(name, outcome, options.create), outcome);
    if (isPromise(result)) result.catch((error: unknown) => this.warnNotRecorded(name, success, error));
  }

  /**
   * `record`, with `guard` free to change the step after seeing the `peers` circuits as
   * the same atomic write reads them (the proxy's ejection cap: proxy/guard-rails.ts). See
   * `guardedItems` for how the peers' reads are made part of the write.
   */
  recordAmong(
    name: string,
    success: boolean,
    options: OutcomeOptions,
    durationMs: number | undefined,
    peers: readonly string[],
    guard: OutcomeGuard,
  ): Promise<Circuit> {
    const outcome = outcomeOf(success, options, durationMs);
    const { items, index } = guardedItems(name, this.outcomeStep(name, outcome, options.create), peers, guard);
    const result = chain(
      this.store.applyBatch(items),
      (results) => this.settle(name, results[index] ?? null, outcome)!.circuit,
    );
    if (!isPromise(result)) return Promise.resolve(result);
    result.catch((error: unknown) => this.warnNotRecorded(name, success, error));
    return result;
  }

  private warnNotRecorded(name: string, success: boolean, error: unknown): void {
    if (this.clock() - this.lastRecordWarning < 1_000) return; // one line a second in an outage, not one per request
    this.lastRecordWarning = this.clock();
    this.logger.warn(
      { event: 'outcome_not_recorded', circuit: name, success, err: error },
      `outcome for ${name} not recorded`,
    );
  }

  /** `record`, group-committed: resolves once the transaction holding it committed. */
  async recordGrouped(name: string, outcome: Outcome, create?: Partial<CircuitSettings>): Promise<Circuit> {
    // A failure always changes the circuit (its count at least): no point trying it as a no-op.
    return this.withRoom(
      [name],
      async () =>
        (await this.submitOne({ name, step: this.outcomeStep(name, outcome, create), outcome }, outcome.success))
          .circuit,
    );
  }

  /** Outcomes in order, in one transaction (group-committed); the circuits after each. */
  recordBatch(outcomes: readonly BatchOutcome[]): Promise<Circuit[]> {
    return this.withRoom(
      outcomes.map((o) => o.name),
      () => this.recordBatchNow(outcomes),
    );
  }

  private async recordBatchNow(outcomes: readonly BatchOutcome[]): Promise<Circuit[]> {
    const items = outcomes.map((o): ServiceItem => ({ name: o.name, step: this.outcomeStep(o.name, o), outcome: o }));
    const results = this.groupCommit ? await this.group.submit(items) : await this.store.applyBatch(items);
    if (!this.groupCommit)
      for (const [i, item] of items.entries()) this.settle(item.name, results[i] ?? null, item.outcome);
    return results.map((r) => r!.circuit);
  }

  /**
   * The circuitlog `call`: refuse with CIRCUIT_OPEN (or CIRCUIT_FORCED_OPEN) when not
   * allowed, else record the outcome; the check and the record are one atomic step.
   */
  async call(name: string, success: boolean, options: OutcomeOptions = {}): Promise<Circuit> {
    const outcome = outcomeOf(success, options);
    const step = (await this.run(name, this.callStep(name, outcome, options.create), outcome))!;
    if (!step.verdict.allowed) throw this.refusal(step.circuit, step.verdict, outcome.caller);
    return step.circuit;
  }

  /** `call`, group-committed; answers the admission instead of throwing. */
  async callGrouped(name: string, success: boolean, options: OutcomeOptions = {}): Promise<Admission> {
    const outcome = outcomeOf(success, options);
    return this.withRoom(
      [name],
      async () =>
        (await this.submitOne(
          { name, step: this.callStep(name, outcome, options.create), outcome },
          true,
        )) as Admission,
    );
  }

  /** Run `write`, which may create the named circuits, only if they fit under `limits.maxCircuits` (`circuit-room.ts`). */
  withRoom<T>(names: readonly string[], write: () => Promise<T>): Promise<T> {
    return this.room.withRoom(names, write);
  }

  /**
   * The error for a refused verdict: `openError`, or CIRCUIT_OPEN scoped to the caller when
   * its own isolation refused it (`caller-refusal.ts`). `circuit` as in `openError`.
   */
  refusal(
    circuit: Circuit,
    verdict: Verdict & { allowed: false },
    caller: string | undefined,
    options: { circuit?: unknown } = {},
  ): AppError {
    if (verdict.scope === 'caller' && caller !== undefined)
      return callerOpenError(circuit, caller, verdict.retryAt, options.circuit);
    return this.openError(circuit, verdict.retryAt, {
      forced: verdict.forced,
      throttled: verdict.throttled,
      circuit: options.circuit,
    });
  }

  /** The error for a refused call (`open-error.ts`). */
  openError(circuit: Circuit, retryAt: number, options: OpenErrorOptions = {}): AppError {
    return openError(circuit, retryAt, options);
  }
}
