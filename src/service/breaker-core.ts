import type { Logger } from 'pino';
import type { Admission, BreakerPolicy, Circuit, Outcome, Step } from '../domain/circuit.js';
import { resolvePolicy, type CircuitPolicy, type CircuitSettings } from '../domain/policy.js';
import { drawOnce, type RandomSource } from '../domain/throttle.js';
import type { BatchItem, CircuitStore } from '../store/circuit-store.js';
import { isPromise, chain, type MaybePromise } from '../store/maybe-promise.js';
import type { BreakerObserver } from './breaker-observer.js';
import { CircuitRoom } from './circuit-room.js';
import { GroupCommit } from './group-commit.js';
import { callStep, outcomeStep } from './steps.js';

/** Epoch milliseconds now; tests pass a fake. */
export type Clock = () => number;

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
export interface ServiceItem extends BatchItem {
  readonly outcome?: Outcome;
}

/**
 * What every use case of `BreakerService` runs through: the store's read-modify-write
 * (`run`), the group commit (`submitOne`), the outcome steps and `settle`, the one place
 * stored results are logged and told to the observer.
 */
export class BreakerCore {
  readonly defaults: CircuitPolicy;
  protected readonly group: GroupCommit<ServiceItem>;
  protected readonly room: CircuitRoom;

  constructor(
    protected readonly store: CircuitStore,
    protected readonly clock: Clock,
    protected readonly logger: Logger,
    defaults: CircuitSettings,
    protected readonly policy: BreakerPolicy,
    /** Off: each outcome is its own transaction (for comparison; see docs/performance.md). */
    protected readonly groupCommit = true,
    /** Told of every stored transition, outcome and refusal (metrics, the event stream). */
    protected readonly observer?: BreakerObserver,
    protected readonly limits: ServiceLimits = {},
    /** Soft throttling's draws (`domain/throttle.ts`); tests pass a fake. */
    protected readonly random: RandomSource = Math.random,
  ) {
    this.defaults = resolvePolicy(defaults);
    this.room = new CircuitRoom(store, limits.maxCircuits);
    this.group = new GroupCommit<ServiceItem>(
      (items) => this.store.applyBatch(items),
      (items, results) => {
        for (const [i, item] of items.entries()) this.settle(item.name, results[i] ?? null, item.outcome);
      },
    );
  }

  protected settingsFor(create: Partial<CircuitSettings> | undefined): CircuitPolicy {
    return create === undefined ? this.defaults : { ...this.defaults, ...create };
  }

  protected outcomeStep(
    name: string,
    outcome: Outcome,
    create?: Partial<CircuitSettings>,
  ): (current: Circuit | null) => Step {
    return outcomeStep(
      { name, settings: this.settingsFor(create), now: this.clock(), activityStampMs: this.limits.activityStampMs },
      outcome,
    );
  }

  protected callStep(
    name: string,
    outcome: Outcome,
    create?: Partial<CircuitSettings>,
  ): (current: Circuit | null) => Admission {
    return callStep(
      { name, settings: this.settingsFor(create), now: this.clock(), activityStampMs: this.limits.activityStampMs },
      outcome,
      this.policy,
      drawOnce(this.random),
    ); // one call, one draw
  }

  /**
   * One step through the group commit. A step that would change nothing on the circuit as
   * stored (a success on a healthy circuit), with nothing queued for that circuit before
   * it, is answered at once: there is nothing to make durable.
   */
  protected async submitOne(item: ServiceItem, mayChangeNothing: boolean): Promise<Step> {
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

  protected run<S extends Step>(
    name: string,
    step: (current: Circuit | null) => S | null,
    outcome?: Outcome,
  ): MaybePromise<S | null> {
    return chain(this.store.apply(name, step), (result) => this.settle(name, result, outcome));
  }

  /**
   * Every stored result passes here once, after its commit: the one place transitions are
   * logged, and where an observer counts outcomes (`outcome` set), refusals and transitions.
   */
  protected settle<S extends Step>(name: string, result: S | null, outcome?: Outcome): S | null {
    if (result === null) return null;
    for (const t of result.transitions) {
      const openUntil = result.circuit.openUntil === null ? null : new Date(result.circuit.openUntil).toISOString();
      const fields = {
        event: 'transition',
        circuit: name,
        from: t.from,
        to: t.to,
        reason: t.reason,
        failure_count: result.circuit.failureCount,
        open_until: openUntil,
      };
      this.logger.info(fields, `circuit ${name}: ${t.from} -> ${t.to} (${t.reason})`);
      this.observer?.transition(result.circuit, t);
    }
    if ((result as Partial<Admission>).verdict?.allowed === false) this.observer?.rejected(result.circuit);
    else if (outcome !== undefined) this.observer?.outcome(result.circuit, outcome.success, outcome.durationMs);
    return result;
  }
}
