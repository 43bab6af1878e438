import type { Logger } from 'pino';
import {
  admit,
  configure,
  newCircuit,
  recordOutcome,
  refresh,
  reset,
  type Admission,
  type BreakerPolicy,
  type Circuit,
  type CircuitState,
  type Outcome,
  type Step,
  type ThrottledVerdict,
  type Transition,
} from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';
import { resolvePolicy, type CircuitPolicy, type CircuitSettings } from '../domain/policy.js';
import { THROTTLE_RETRY_AFTER_MS, drawOnce, type RandomSource } from '../domain/throttle.js';
import type { BatchItem, CircuitStore } from '../store/circuit-store.js';
import { isPromise, chain, type MaybePromise } from '../store/maybe-promise.js';
import type { BreakerObserver } from './breaker-observer.js';
import { GroupCommit } from './group-commit.js';

/** Epoch milliseconds now; tests pass a fake. */
export type Clock = () => number;

export interface OutcomeOptions {
  /** Settings used only if this call creates the circuit. */
  readonly create?: Partial<CircuitSettings>;
  readonly timeoutSeconds?: number;
  /** How long the call took; judged against a window's slow-call duration. */
  readonly durationMs?: number;
}

/** One outcome of a batch. */
export interface BatchOutcome extends Outcome {
  readonly name: string;
}

/** Bounds on what callers make the service hold (config `limits`). */
export interface ServiceLimits {
  /** A new name past this many circuits gets 507 TOO_MANY_CIRCUITS (needs `store.count`). */
  readonly maxCircuits?: number;
  /**
   * With idle deletion on: an outcome that changes nothing still writes `updatedAt` when
   * it is older than this, so `updatedAt` tells when a circuit was last used (housekeeping.ts).
   */
  readonly activityStampMs?: number;
}

/** A batch step that records an outcome carries it, for `settle`. */
interface ServiceItem extends BatchItem {
  readonly outcome?: Outcome;
}

/**
 * The breaker use cases: each one is a pure step from `domain/` run through the store's
 * atomic read-modify-write. Every stored result, single or group-committed, passes
 * through `settle` (one log line per transition; the one hook for observers). The
 * direct methods (`get`, `check`, `record`) serve the proxy; the HTTP routes record
 * through the group-committed `*Grouped` methods. Answers are synchronous whenever the
 * store's are (SQLite always; Redis from its cache, see `maybe-promise.ts`).
 */
export class BreakerService {
  readonly defaults: CircuitPolicy;
  private readonly group: GroupCommit<ServiceItem>;
  private lastRecordWarning = -Infinity;
  /** New circuits this process is writing right now, counted against `maxCircuits` before they are stored. */
  private creating = 0;

  constructor(
    private readonly store: CircuitStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    defaults: CircuitSettings,
    private readonly policy: BreakerPolicy,
    /** Off: each outcome is its own transaction (for comparison; see docs/performance.md). */
    private readonly groupCommit = true,
    /** Told of every stored transition, outcome and refusal (metrics, the event stream). */
    private readonly observer?: BreakerObserver,
    private readonly limits: ServiceLimits = {},
    /** Soft throttling's draws (`domain/throttle.ts`); tests pass a fake. */
    private readonly random: RandomSource = Math.random,
  ) {
    this.defaults = resolvePolicy(defaults);
    this.group = new GroupCommit<ServiceItem>(
      (items) => this.store.applyBatch(items),
      (items, results) => items.forEach((item, i) => this.settle(item.name, results[i] ?? null, item.outcome)),
    );
  }

  now(): number {
    return this.clock();
  }

  /** The circuit after the lazy open -> half-open transition, or null if unknown. */
  get(name: string): MaybePromise<Circuit | null> {
    const now = this.clock();
    return chain(this.run(name, (c) => (c === null ? null : refresh(c, now))), (step) => step?.circuit ?? null);
  }

  /**
   * May a call go ahead? Unknown circuits are closed and allowed (and not created).
   * In half-open an admitted call takes a probe slot.
   */
  check(name: string): MaybePromise<Admission | null> {
    const now = this.clock();
    const random = drawOnce(this.random); // one admission, one draw, however often the store runs the step
    return this.run(name, (c) => (c === null ? null : admit(c, now, this.policy, random)));
  }

  /**
   * Record an outcome (circuitlog's rules), creating the circuit with defaults (or `options.create`) if missing.
   * The proxy fires and forgets: a failed write (storage down) is logged here, never an unhandled rejection.
   */
  record(name: string, success: boolean, options: OutcomeOptions = {}, durationMs = options.durationMs): MaybePromise<Circuit> {
    // `durationMs` apart from `options`: the proxy passes a shared options object and a per-call number (no allocation).
    const outcome: Outcome = { success, timeoutSeconds: options.timeoutSeconds, durationMs };
    const result = chain(this.run(name, this.outcomeStep(name, outcome, options.create), outcome), (step) => step!.circuit);
    if (isPromise(result)) {
      result.catch((error: unknown) => {
        if (this.clock() - this.lastRecordWarning < 1_000) return; // one line a second in an outage, not one per request
        this.lastRecordWarning = this.clock();
        this.logger.warn({ event: 'outcome_not_recorded', circuit: name, success, err: error }, `outcome for ${name} not recorded`);
      });
    }
    return result;
  }

  /** `record`, group-committed: resolves once the transaction holding it committed. */
  async recordGrouped(name: string, outcome: Outcome, create?: Partial<CircuitSettings>): Promise<Circuit> {
    // A failure always changes the circuit (its count at least): no point trying it as a no-op.
    return this.withRoom([name], async () => (await this.submitOne({ name, step: this.outcomeStep(name, outcome, create), outcome }, outcome.success)).circuit);
  }

  /** Outcomes in order, in one transaction (group-committed); the circuits after each. */
  recordBatch(outcomes: readonly BatchOutcome[]): Promise<Circuit[]> {
    return this.withRoom(outcomes.map((o) => o.name), () => this.recordBatchNow(outcomes));
  }

  private async recordBatchNow(outcomes: readonly BatchOutcome[]): Promise<Circuit[]> {
    const items = outcomes.map((o): ServiceItem => ({ name: o.name, step: this.outcomeStep(o.name, o), outcome: o }));
    const results = this.groupCommit ? await this.group.submit(items) : await this.store.applyBatch(items);
    if (!this.groupCommit) items.forEach((item, i) => this.settle(item.name, results[i] ?? null, item.outcome));
    return results.map((r) => r!.circuit);
  }

  /**
   * The circuitlog `call`: refuse with CIRCUIT_OPEN (or CIRCUIT_FORCED_OPEN) when not
   * allowed, else record the outcome; the check and the record are one atomic step.
   */
  call(name: string, success: boolean, options: OutcomeOptions = {}): MaybePromise<Circuit> {
    const outcome: Outcome = { success, timeoutSeconds: options.timeoutSeconds };
    return chain(this.run(name, this.callStep(name, outcome, options.create), outcome), (step) => {
      const verdict = step!.verdict;
      if (!verdict.allowed) throw this.openError(step!.circuit, verdict.retryAt, { forced: verdict.forced, throttled: verdict.throttled });
      return step!.circuit;
    });
  }

  /** `call`, group-committed; answers the admission instead of throwing. */
  async callGrouped(name: string, success: boolean, options: OutcomeOptions = {}): Promise<Admission> {
    const outcome: Outcome = { success, timeoutSeconds: options.timeoutSeconds };
    return this.withRoom([name], async () => (await this.submitOne({ name, step: this.callStep(name, outcome, options.create), outcome }, true)) as Admission);
  }

  /**
   * Run `write`, which may create the named circuits, only if they fit under
   * `limits.maxCircuits`; else TOO_MANY_CIRCUITS and nothing is written. Existing circuits
   * always pass. Circuits this process is creating meanwhile count as stored, so concurrent
   * requests cannot overshoot the limit together (across processes they can, by at most
   * the creations in flight at once).
   */
  async withRoom<T>(names: readonly string[], write: () => Promise<T>): Promise<T> {
    const max = this.limits.maxCircuits;
    if (max === undefined || this.store.count === undefined) return write();
    const unique = [...new Set(names)];
    const found = unique.map((name) => this.store.find(name));
    const circuits = found.some(isPromise) ? await Promise.all(found) : (found as (Circuit | null)[]);
    const missing = circuits.filter((c) => c === null).length;
    if (missing === 0) return write();
    const stored = await this.store.count();
    if (stored + this.creating + missing > max) {
      const name = unique[circuits.indexOf(null)]!;
      throw new AppError('TOO_MANY_CIRCUITS', `No circuit named '${name}' exists and the store already holds limits.max_circuits (${max}) circuits; nothing was written. Delete unused circuits or raise the limit.`, {
        extensions: { max_circuits: max },
      });
    }
    this.creating += missing;
    try {
      return await write();
    } finally {
      this.creating -= missing;
    }
  }

  private callStep(name: string, outcome: Outcome, create?: Partial<CircuitSettings>): (current: Circuit | null) => Admission {
    const now = this.clock();
    const record = this.outcomeStep(name, outcome, create);
    const random = drawOnce(this.random); // one call, one draw, however often the store runs the step
    return (current) => {
      const c = current ?? newCircuit(name, this.settingsFor(create), now);
      const admission = admit(c, now, this.policy, random);
      if (!admission.verdict.allowed) return admission;
      const next = record(admission.circuit);
      return { circuit: next.circuit, transitions: [...admission.transitions, ...next.transitions], verdict: admission.verdict };
    };
  }

  /** Close the circuit; null if unknown. */
  reset(name: string): MaybePromise<Circuit | null> {
    const now = this.clock();
    return chain(this.run(name, (c) => (c === null ? null : reset(c, now))), (step) => step?.circuit ?? null);
  }

  /**
   * Set a circuit's policy, creating it with that policy when missing. `policyFor` sees
   * the stored circuit (inside the write transaction) and may throw to change nothing.
   */
  configure(name: string, policyFor: (current: Circuit | null) => CircuitPolicy): MaybePromise<{ circuit: Circuit; created: boolean }> {
    const now = this.clock();
    let created = false;
    const step = this.run(name, (current) => {
      const policy = policyFor(current);
      created = current === null;
      // A new circuit starts unforced, so that a force it is created with is an event too.
      if (current === null) return configure(newCircuit(name, { ...policy, forcedState: null }, now), policy, now);
      const refreshed = refresh(current, now);
      const next = configure(refreshed.circuit, policy, now);
      return { circuit: next.circuit, transitions: [...refreshed.transitions, ...next.transitions] };
    });
    return chain(step, (s) => ({ circuit: s!.circuit, created }));
  }

  /**
   * Write the open -> half-open transitions that are due (up to `limit`), each stamped at
   * its `openUntil`, so stream listeners and the timeline see them without traffic. Run by
   * one process (see `DueTransitions`); answers how many circuits it changed.
   */
  async publishDue(limit = 500): Promise<number> {
    const names = await this.store.dueOpen(this.clock(), limit);
    let changed = 0;
    for (const name of names) {
      const now = this.clock();
      const step = await this.run(name, (c) => (c === null ? null : refresh(c, now)));
      if (step !== null && step.transitions.length > 0) changed++;
    }
    return changed;
  }

  /** Remove the circuit and its events; false if unknown. */
  delete(name: string): MaybePromise<boolean> {
    return this.store.delete(name);
  }

  /**
   * A page of circuits as a read of each would show them. Only the first `pageSize` (the
   * page; a row past it only tells whether more exist) get their lazy transition written;
   * the state filter judges open circuits by `now`.
   */
  list(query: { state?: CircuitState; afterId?: number; limit: number }, pageSize = query.limit): MaybePromise<Circuit[]> {
    const now = this.clock();
    return chain(this.store.list({ ...query, now }), (rows) => {
      const circuits = rows.map((c, i) => (i >= pageSize || refresh(c, now).circuit === c ? c : chain(this.get(c.name), (got) => got ?? c)));
      return circuits.some(isPromise) ? Promise.all(circuits) : (circuits as Circuit[]);
    });
  }

  events(name: string, limit: number): MaybePromise<Transition[] | null> {
    return chain(this.store.find(name), (circuit) => (circuit === null ? null : this.store.events(circuit.id, limit)));
  }

  /**
   * The error for a refused call: CIRCUIT_FORCED_OPEN when forced, CIRCUIT_THROTTLED when
   * the soft throttle refused it, else CIRCUIT_OPEN. `circuit` replaces the `circuit`
   * member (circuitlog's `/call` sends the whole object).
   */
  openError(circuit: Circuit, retryAt: number, options: { forced?: boolean; throttled?: ThrottledVerdict; circuit?: unknown } = {}): AppError {
    const extensions = {
      circuit: options.circuit ?? circuit.name,
      state: circuit.state,
      open_until: circuit.openUntil === null ? null : new Date(circuit.openUntil).toISOString(),
    };
    if (options.throttled) return throttledError(circuit, options.throttled, extensions);
    if (options.forced) {
      const detail = `Circuit '${circuit.name}' is forced open by an operator; every call is refused until the force is cleared.`;
      return new AppError('CIRCUIT_FORCED_OPEN', detail, { retryAt, extensions: { ...extensions, forced_state: 'open' } });
    }
    const detail =
      circuit.state === 'open'
        ? `Circuit '${circuit.name}' is open; calls are refused until ${new Date(retryAt).toISOString()}.`
        : `Circuit '${circuit.name}' is half-open and all ${circuit.halfOpenMaxCalls} probe slot(s) are taken.`;
    return new AppError('CIRCUIT_OPEN', detail, { retryAt, extensions });
  }

  private settingsFor(create: Partial<CircuitSettings> | undefined): CircuitPolicy {
    return create === undefined ? this.defaults : { ...this.defaults, ...create };
  }

  /**
   * The step recording one outcome, creating the circuit if missing. Every outcome, on
   * every route and the proxy, is turned into its step here and stored through `settle`.
   */
  private outcomeStep(name: string, outcome: Outcome, create?: Partial<CircuitSettings>): (current: Circuit | null) => Step {
    const now = this.clock();
    // A new circuit is written even when the outcome changes nothing: the store writes
    // whenever the step's circuit is not the one it read, and it read none.
    const stampMs = this.limits.activityStampMs;
    return (current) => {
      const step = recordOutcome(current ?? newCircuit(name, this.settingsFor(create), now), outcome, now);
      // Idle deletion reads `updatedAt` as "last used": refresh it, at most once per stampMs.
      if (stampMs !== undefined && current !== null && step.circuit === current && now - current.updatedAt >= stampMs) {
        return { ...step, circuit: { ...current, updatedAt: now } };
      }
      return step;
    };
  }

  /**
   * One step through the group commit. A step that would change nothing on the circuit as
   * stored (a success on a healthy circuit), with nothing queued for that circuit before
   * it, is answered at once: there is nothing to make durable.
   */
  private async submitOne(item: ServiceItem, mayChangeNothing: boolean): Promise<Step> {
    if (!this.groupCommit) return (await this.run(item.name, item.step, item.outcome))!;
    if (mayChangeNothing && !this.group.isPending(item.name)) {
      const found = this.store.find(item.name);
      const current = isPromise(found) ? await found : found;
      // Re-checked: while the read was on its way, a step for this circuit may have been queued.
      if (current !== null && !this.group.isPending(item.name)) {
        const result = item.step(current);
        if (result !== null && result.circuit === current) return this.settle(item.name, result, item.outcome)!;
      }
    }
    const [result] = await this.group.submit([item]);
    return result!;
  }

  private run<S extends Step>(name: string, step: (current: Circuit | null) => S | null, outcome?: Outcome): MaybePromise<S | null> {
    return chain(this.store.apply(name, step), (result) => this.settle(name, result, outcome));
  }

  /**
   * Every stored result passes here once, after its commit: the one place transitions are
   * logged, and where an observer would count outcomes (`outcome` set) and transitions.
   */
  private settle<S extends Step>(name: string, result: S | null, outcome?: Outcome): S | null {
    if (result === null) return null;
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
    if ((result as Partial<Admission>).verdict?.allowed === false) this.observer?.rejected(result.circuit);
    else if (outcome !== undefined) this.observer?.outcome(result.circuit, outcome.success, outcome.durationMs);
    return result;
  }
}

/** A call the soft throttle refused: 503 `circuit-throttled`, `Retry-After: 1`, the probability it was drawn against. */
function throttledError(circuit: Circuit, throttled: ThrottledVerdict, extensions: Record<string, unknown>): AppError {
  const percent = Math.round(throttled.probability * 1000) / 10;
  const detail = `Circuit '${circuit.name}' is closed but throttled: it refuses ${percent}% of calls while its dependency accepts too few of them.`;
  return new AppError('CIRCUIT_THROTTLED', detail, {
    retryAfterSeconds: THROTTLE_RETRY_AFTER_MS / 1000,
    extensions: { ...extensions, throttle_probability: throttled.probability },
  });
}
