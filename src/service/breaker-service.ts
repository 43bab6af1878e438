import { seenBefore, withSourceMark } from '../domain/outcome-source.js';
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
  type Transition,
} from '../domain/circuit.js';
import { nameRanges } from '../domain/circuit-name.js';
import { AppError } from '../domain/errors.js';
import { policyOf, resolvePolicy, samePolicy, type CircuitPolicy, type CircuitSettings } from '../domain/policy.js';
import type { HistoryHook } from '../domain/history.js';
import { HISTORY_DEFAULTS, keepsHistory, type HistorySettings } from '../domain/history-settings.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import { advanceShadow, refreshShadow, resetShadow, shadowWouldRefuse, withShadowPolicy } from '../domain/shadow.js';
import { drawOnce, type RandomSource } from '../domain/throttle.js';
import type { BatchItem, CircuitStore } from '../store/circuit-store.js';
import { isPromise, chain, type MaybePromise } from '../store/maybe-promise.js';
import type { BreakerObserver } from './breaker-observer.js';
import { GroupCommit } from './group-commit.js';

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

/** What the service is built from (`createApp` passes its own deps; tests pass fakes). */
export interface BreakerDeps {
  readonly store: CircuitStore;
  readonly clock: Clock;
  readonly logger: Logger;
  /** The policy a circuit is created with when a write names a missing one. */
  readonly circuitDefaults: CircuitSettings;
  readonly policy: BreakerPolicy;
  /** Group-commit the `grouped` writes (default on); off, each is its own transaction (docs/performance.md). */
  readonly groupCommit?: boolean;
  /** Told of every stored transition, outcome and refusal (metrics, the event stream). */
  readonly observer?: BreakerObserver;
  readonly limits?: ServiceLimits;
  /** Soft throttling's draws (`domain/throttle.ts`; default `Math.random`); tests pass a fake. */
  readonly random?: RandomSource;
  /**
   * Config `history.enabled` (issue 31; default on): whether the store keeps an outcome history.
   * With it on, an outcome that changes nothing is still a write (its history entry), so the
   * group commit does not answer it at once (`groupCommitted`).
   */
  readonly history?: boolean;
}

/** How an outcome is written: the rules of the route it came by. */
export interface RecordRules {
  /** Settings used only if this write creates the circuit. */
  readonly create?: Partial<CircuitSettings>;
  /**
   * The HTTP routes: a new circuit must fit under `limits.maxCircuits`, and the write joins the
   * group commit; the answer waits for its commit. Without it (the proxy, health checks, whose
   * outcomes are in nobody's answer) the write is applied at once: one that fails later is
   * logged, never an unhandled rejection; one that fails at once (SQLite busy) throws.
   */
  readonly grouped?: boolean;
  /**
   * circuitlog's `call`: admit first, and record only an admitted call, in one atomic step (a
   * refusal is answered in the verdict, not thrown).
   */
  readonly admit?: boolean;
  /** The proxy's ejection cap (a write at once, not `grouped`): written with a read of `peers`, `guard` deciding the step. */
  readonly among?: { readonly peers: readonly string[]; readonly guard: OutcomeGuard };
}

/**
 * What a PATCH sets: the live policy, and the shadow's (issue 31): a policy sets it, null
 * clears it, undefined leaves it as it is.
 */
export interface PolicyChange {
  readonly policy: CircuitPolicy;
  readonly shadow?: CircuitPolicy | null;
}

/** Rules that admit first: the answer carries the verdict. */
export type AdmitRules = RecordRules & { readonly admit: true };

/** One outcome of a batch. */
export interface BatchOutcome extends Outcome {
  readonly name: string;
  /** Its number from the batch's source (issue 32, `domain/outcome-source.ts`): applied at most once. */
  readonly seq?: number;
}

/**
 * May a call go ahead: the admission, or null for a circuit never recorded (closed by
 * definition, allowed, and not created).
 */
export type Decision = Admission | null;

/** A write of the service: a step, and the outcome it records (for `settle`). */
interface ServiceItem extends BatchItem {
  readonly outcome?: Outcome;
}

/** How `grouped` writes are committed, chosen once (`BreakerDeps.groupCommit`). */
interface Committer {
  /** One write, answered once it is durable; `mayChangeNothing`: it may leave the circuit as stored. */
  one(item: ServiceItem, mayChangeNothing: boolean): Promise<Step>;
  /** Writes in order, in one transaction. */
  all(items: readonly ServiceItem[]): Promise<(Step | null)[]>;
}

const LIST_PAGE = 1000; // circuits per read when counting

/**
 * The breaker's use cases: each one is a pure step from `domain/` run through the store's
 * atomic read-modify-write. Every stored result, single or group-committed, passes through
 * `settle` (one log line per transition; the one hook for observers). The value-or-promise
 * of the store (`maybe-promise.ts`) stops here: callers get a promise, except `peekAllowed`,
 * the synchronous fast path of `GET /allowed` and the proxy's pick (a closed circuit answers
 * from memory, no microtask). Every outcome is written by `record` (or `recordBatch`, many at
 * once), its `RecordRules` saying how.
 */
export class BreakerService {
  readonly defaults: CircuitPolicy;
  private readonly store: CircuitStore;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly policy: BreakerPolicy;
  private readonly observer: BreakerObserver | undefined;
  private readonly limits: ServiceLimits;
  private readonly random: RandomSource;
  private readonly committer: Committer;
  private readonly history: HistorySettings;
  /** New circuits this process is writing right now, counted before they are stored (`withRoom`). */
  private creating = 0;
  private lastRecordWarning = -Infinity;

  constructor(deps: BreakerDeps) {
    this.store = deps.store;
    this.clock = deps.clock;
    this.logger = deps.logger;
    this.policy = deps.policy;
    this.observer = deps.observer;
    this.limits = deps.limits ?? {};
    this.random = deps.random ?? Math.random;
    this.defaults = resolvePolicy(deps.circuitDefaults);
    this.history = { ...HISTORY_DEFAULTS, enabled: deps.history ?? HISTORY_DEFAULTS.enabled };
    this.committer = deps.groupCommit === false ? this.ownTransactions() : this.groupCommitted();
  }

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
    const admission = admit(
      current,
      this.clock(),
      this.policy,
      caller,
      () => {
        mustDraw = true;
        return 1; // admits; the answer is not used
      },
      this.random, // a ramping circuit's draw writes nothing: decided here (issue 29)
    );
    // Taking a probe slot or moving to half-open is a write: that is `allowed`'s work.
    if (mustDraw || admission.circuit !== current) return undefined;
    return this.settle(name, admission);
  }

  /**
   * The circuit as the store holds it in memory right now, without a write or a round trip
   * (null: not stored; undefined: not in memory, ask `get`). Not refreshed: an open circuit
   * past its open time is still `open` here (the proxy's panic reading judges that itself).
   */
  peekCircuit(name: string): Circuit | null | undefined {
    return this.store.peek(name);
  }

  /** Would the circuit's shadow policy refuse this call now (read-only; false without a shadow)? */
  shadowWouldRefuse(circuit: Circuit, caller?: string): boolean {
    return circuit.shadow != null && shadowWouldRefuse(circuit, this.clock(), this.policy, caller);
  }

  /**
   * May a call go ahead? Unknown circuits are closed and allowed (and not created).
   * In half-open an admitted call takes a probe slot.
   */
  async allowed(name: string, caller?: string): Promise<Decision> {
    const now = this.clock();
    const random = drawOnce(this.random); // one admission, one draw, however often the store runs the step
    const rampRandom = drawOnce(this.random); // the slow start's own draw (issue 29)
    return this.run(name, (c) => (c === null ? null : admit(c, now, this.policy, caller, random, rampRandom)));
  }

  /**
   * Record an outcome, creating the circuit with the defaults (or `rules.create`) if missing:
   * every route and the proxy write outcomes here, `rules` saying how (see `RecordRules`).
   * With `admit` the answer is the admission; a refused call recorded nothing.
   */
  record(name: string, outcome: Outcome, rules: AdmitRules): Promise<Admission>;
  record(name: string, outcome: Outcome, rules?: RecordRules): Promise<Step>;
  record(name: string, outcome: Outcome, rules: RecordRules = {}): Promise<Step> {
    const context = this.stepContext(name, rules.create);
    const history = outcomeHistory(context.now, outcome);
    if (rules.grouped) {
      // A failure always changes the circuit (its count at least), unless a call is refused.
      const mayChangeNothing = outcome.success || rules.admit === true;
      return this.withRoom([name], () =>
        this.committer.one({ name, step: this.stepOf(context, outcome, rules), outcome, history }, mayChangeNothing),
      );
    }
    const step = this.stepOf(context, outcome, rules);
    const written =
      rules.among === undefined
        ? chain(this.store.apply(name, step, history), (result) => this.settle(name, result, outcome)!)
        : this.writeAmong(name, step, outcome, rules.among, history);
    if (!isPromise(written)) return Promise.resolve(written);
    written.catch((error: unknown) => this.warnNotRecorded(name, outcome.success, error));
    return written;
  }

  /**
   * Outcomes in order, in one transaction (group-committed, within `limits.maxCircuits`); the
   * circuits after each. With a `source` (issue 32), an outcome with a `seq` the circuit applied
   * already from that source changes nothing (not even its history): it was sent again.
   */
  recordBatch(outcomes: readonly BatchOutcome[], source?: string): Promise<Circuit[]> {
    return this.withRoom(
      outcomes.map((o) => o.name),
      async () => {
        const items = outcomes.map((o): ServiceItem => {
          const context = this.stepContext(o.name);
          const step = outcomeStep(context, o);
          const history = outcomeHistory(context.now, o);
          if (source === undefined || o.seq === undefined) return { name: o.name, step, outcome: o, history };
          return { name: o.name, outcome: o, ...onceFromSource(step, history, source, o.seq, context.now) };
        });
        return (await this.committer.all(items)).map((r) => r!.circuit);
      },
    );
  }

  /** The circuit after the lazy open -> half-open transition, or null if unknown. */
  async get(name: string): Promise<Circuit | null> {
    const now = this.clock();
    const step = (c: Circuit | null) => (c === null ? null : withShadowRefreshed(refresh(c, now), now));
    return (await this.run(name, step))?.circuit ?? null;
  }

  /** Close the circuit; null if unknown. */
  async reset(name: string, by?: string): Promise<Circuit | null> {
    return (await this.resetCircuit(name, by))?.circuit ?? null;
  }

  /**
   * Close the circuit, its manual_reset transition naming `by` (who asked: issue 30); the
   * circuit as the write read it and after it, or null if unknown.
   */
  async resetCircuit(name: string, by?: string): Promise<{ before: Circuit; circuit: Circuit } | null> {
    const now = this.clock();
    let before: Circuit | null = null;
    // A reset that changed something is a manual action in the history (issue 31).
    const history: HistoryHook = (stored, result) =>
      result.circuit === stored
        ? null
        : { type: 'manual', action: 'reset', t: now, ...(by === undefined ? {} : { by }) };
    const step = await this.run(
      name,
      (c) => {
        before = c;
        if (c === null) return null;
        const done = reset(c, now);
        return madeBy(c.shadow == null ? done : resetShadow(done, now), by);
      },
      undefined,
      history,
    );
    return step === null || before === null ? null : { before, circuit: step.circuit };
  }

  /**
   * Set a circuit's policy, creating it with that policy when missing. `policyFor` sees
   * the stored circuit (inside the write transaction) and may throw to change nothing; it may
   * also set (a policy) or clear (null) the circuit's shadow policy (issue 31, `domain/shadow.ts`).
   */
  async configure(
    name: string,
    policyFor: (current: Circuit | null) => CircuitPolicy | PolicyChange,
    by?: string,
  ): Promise<{ circuit: Circuit; created: boolean; before: Circuit | null }> {
    const now = this.clock();
    let created = false;
    let before: Circuit | null = null;
    const step = await this.run(
      name,
      (current) => {
        const asked = policyFor(current);
        const { policy, shadow } = 'policy' in asked ? asked : { policy: asked, shadow: undefined };
        created = current === null;
        // A new circuit starts unforced, so that a force it is created with is an event too.
        if (current === null) {
          const made = madeBy(configure(newCircuit(name, { ...policy, forcedState: null }, now), policy, now), by);
          return shadow == null ? made : { ...made, circuit: withShadowPolicy(made.circuit, shadow, now) };
        }
        const refreshed = withShadowRefreshed(refresh(current, now), now);
        before = refreshed.circuit;
        const next = madeBy(configure(refreshed.circuit, policy, now), by);
        const circuit = shadow === undefined ? next.circuit : withShadowPolicy(next.circuit, shadow, now);
        if (circuit === current && refreshed.transitions.length === 0) return { circuit, transitions: [] };
        return { circuit, transitions: [...refreshed.transitions, ...next.transitions] };
      },
      undefined,
      configureHistory(now, by),
    );
    return { circuit: step!.circuit, created, before };
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
  async delete(name: string): Promise<boolean> {
    return this.store.delete(name);
  }

  /**
   * Remove the circuit and its events, answering it as it was read just before (for the audit
   * log: the read and the delete are two steps, so a write in between is not in the answer);
   * null if unknown.
   */
  async deleteCircuit(name: string): Promise<Circuit | null> {
    const found = await this.store.find(name);
    if (found === null || !(await this.store.delete(name))) return null;
    return found;
  }

  /**
   * A page of circuits as a read of each would show them. Only the first `pageSize` (the
   * page; a row past it only tells whether more exist) get their lazy transition written;
   * the state filter judges open circuits by `now`.
   */
  async list(
    query: { state?: CircuitState; afterId?: number; limit: number },
    pageSize = query.limit,
  ): Promise<Circuit[]> {
    const now = this.clock();
    const rows = await this.store.list({ ...query, now });
    return Promise.all(
      rows.map((c, i) =>
        i >= pageSize || refresh(c, now).circuit === c ? c : this.get(c.name).then((got) => got ?? c),
      ),
    );
  }

  async events(name: string, limit: number): Promise<Transition[] | null> {
    const circuit = await this.store.find(name);
    return circuit === null ? null : this.store.events(circuit.id, limit);
  }

  /** The names among `names` that no stored circuit has (what a write would create). */
  async missing(names: readonly string[]): Promise<string[]> {
    const unique = [...new Set(names)];
    const found = await Promise.all(unique.map((name) => this.store.find(name)));
    return unique.filter((_, i) => found[i] === null);
  }

  /**
   * How many stored circuits the name patterns match (exact, or `*` last: null matches every
   * name), counted up to `atMost` (what a quota needs to know): through the store's name index
   * when it has one (SQLite: at most `atMost` index entries per pattern), else read page by page
   * (LIST_PAGE rows at a time), stopping once `atMost` are found.
   */
  async countMatching(patterns: readonly string[] | null, atMost: number): Promise<number> {
    if (patterns !== null && this.store.countNamed !== undefined)
      return Math.min(atMost, await this.store.countNamed(nameRanges(patterns), atMost));
    if (patterns === null && this.store.count !== undefined) return Math.min(atMost, await this.store.count());
    const ranges = nameRanges(patterns ?? ['*']);
    let count = 0;
    let afterId: number | undefined;
    for (;;) {
      const rows = await this.store.list({ afterId, limit: LIST_PAGE, now: this.clock() });
      for (const { name } of rows) if (ranges.some(([from, to]) => name >= from && name < to)) count++;
      if (count >= atMost || rows.length < LIST_PAGE) return Math.min(count, atMost);
      afterId = rows.at(-1)!.id;
    }
  }

  /**
   * `limits.maxCircuits`: run `write`, which may create the named circuits, only if they fit;
   * else TOO_MANY_CIRCUITS and nothing is written. Existing circuits always pass. Circuits
   * this process is creating meanwhile count as stored, so concurrent requests cannot
   * overshoot the limit together (across processes they can, by at most the creations in
   * flight at once). The problem names the circuits refused (`refused_circuits`): the new
   * names past the room left, in order of first appearance, so a client can drop their items
   * and resend the rest at once.
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
      const room = Math.max(0, max - stored - this.creating);
      const refused = unique.filter((_, i) => circuits[i] === null).slice(room);
      throw new AppError(
        'TOO_MANY_CIRCUITS',
        `No circuit named '${refused[0]}' exists and the store already holds limits.max_circuits (${max}) circuits; nothing was written. Delete unused circuits or raise the limit.`,
        { extensions: { max_circuits: max, refused_circuits: refused } },
      );
    }
    this.creating += missing;
    try {
      return await write();
    } finally {
      this.creating -= missing;
    }
  }

  /** The step that records `outcome` (`outcomeStep` below), admitting the call first with `rules.admit`. */
  private stepOf(context: StepContext, outcome: Outcome, rules: RecordRules): (current: Circuit | null) => Step {
    if (!rules.admit) return outcomeStep(context, outcome);
    return callStep(context, outcome, this.policy, drawOnce(this.random), drawOnce(this.random)); // one call, one draw each
  }

  private stepContext(name: string, create?: Partial<CircuitSettings>): StepContext {
    const settings = create === undefined ? this.defaults : { ...this.defaults, ...create };
    return { name, settings, now: this.clock(), activityStampMs: this.limits.activityStampMs, policy: this.policy };
  }

  /**
   * Group commit (`group-commit.ts`). A step that would change nothing on the circuit as
   * stored (a success on a healthy circuit, a refused call), with nothing queued for that
   * circuit before it, is answered at once: there is nothing to make durable. Unless the
   * history keeps the circuit's outcomes (issue 31): then the outcome's entry must be durable
   * before the answer, and it is committed like any write.
   */
  private groupCommitted(): Committer {
    const group = new GroupCommit<ServiceItem>(
      (items) => this.store.applyBatch(items),
      (items, results) => this.settleAll(items, results),
    );
    const one = async (item: ServiceItem, mayChangeNothing: boolean): Promise<Step> => {
      if (mayChangeNothing && !group.isPending(item.name)) {
        const found = this.store.find(item.name);
        const current = isPromise(found) ? await found : found;
        // Re-checked: while the read was on its way, a step for this circuit may have been queued.
        if (current !== null && !group.isPending(item.name)) {
          const result = item.step(current);
          if (result !== null && result.circuit === current && !this.keepsEntry(item, current, result))
            return this.settle(item.name, result, item.outcome)!;
        }
      }
      const [result] = await group.submit([item]);
      return result!;
    };
    return { one, all: (items) => group.submit(items) };
  }

  /** Group commit off: each write its own transaction (for comparison; docs/performance.md). */
  private ownTransactions(): Committer {
    return {
      one: async (item) => (await this.run(item.name, item.step, item.outcome, item.history))!,
      all: async (items) => this.settleAll(items, await this.store.applyBatch(items)),
    };
  }

  /** An outcome under a guard over its peers, in one atomic write (`guardedItems` below). */
  private writeAmong(
    name: string,
    step: (current: Circuit | null) => Step,
    outcome: Outcome,
    among: NonNullable<RecordRules['among']>,
    history: HistoryHook,
  ): MaybePromise<Step> {
    const { items, index } = guardedItems(name, step, among.peers, among.guard, history);
    return chain(this.store.applyBatch(items), (results) => this.settle(name, results[index] ?? null, outcome)!);
  }

  private run<S extends Step>(
    name: string,
    step: (current: Circuit | null) => S | null,
    outcome?: Outcome,
    history?: HistoryHook,
  ): MaybePromise<S | null> {
    return chain(this.store.apply(name, step, history), (result) => this.settle(name, result, outcome));
  }

  /**
   * Whether the history keeps an entry of `item`'s step that left `circuit` as it was (config
   * `history.enabled`, the circuit's policy field `history`, and the item's hook: a refused
   * call has no entry, so it is still answered at once).
   */
  private keepsEntry(item: ServiceItem, circuit: Circuit, result: Step): boolean {
    return keepsHistory(this.history, circuit) && item.history !== undefined && item.history(circuit, result) !== null;
  }

  private settleAll(items: readonly ServiceItem[], results: readonly (Step | null)[]): (Step | null)[] {
    for (const [i, item] of items.entries()) this.settle(item.name, results[i] ?? null, item.outcome);
    return results as (Step | null)[];
  }

  /**
   * Every stored result passes here once, after its commit: the one place transitions are
   * logged, and where an observer counts outcomes (`outcome` set), refusals and transitions.
   */
  private settle<S extends Step>(name: string, result: S | null, outcome?: Outcome): S | null {
    if (result === null) return null;
    for (const t of result.transitions) {
      // A shadow policy's transition (issue 31) names its own counts; the live circuit did not change.
      const c = t.shadow === true ? (result.circuit.shadow?.circuit ?? result.circuit) : result.circuit;
      const fields = {
        event: 'transition',
        circuit: name,
        from: t.from,
        to: t.to,
        reason: t.reason,
        failure_count: c.failureCount,
        open_until: c.openUntil === null ? null : new Date(c.openUntil).toISOString(),
        ...(t.shadow === true ? { shadow: true } : {}),
      };
      this.logger.info(
        fields,
        `circuit ${name}${t.shadow === true ? ' shadow' : ''}: ${t.from} -> ${t.to} (${t.reason})`,
      );
      this.observer?.transition(result.circuit, t);
    }
    if ((result as Partial<Admission>).verdict?.allowed === false) this.observer?.rejected(result.circuit);
    else if (outcome !== undefined)
      this.observer?.outcome(result.circuit, outcome.success, outcome.durationMs, outcome.kind);
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
}

// The pure steps the service hands its store: every outcome, on every route and the proxy.

/** The step with the circuit's shadow refreshed too (issue 31); a circuit without one skips shadow.ts. */
function withShadowRefreshed(step: Step, now: number): Step {
  return step.circuit.shadow == null ? step : refreshShadow(step, now);
}

const DEFAULT_BREAKER_POLICY: BreakerPolicy = { probeLeaseMs: POLICY_DEFAULTS.probeLeaseSeconds * 1000 };

const MANUAL_REASONS: ReadonlySet<string> = new Set(['forced_open', 'forced_closed', 'force_cleared', 'manual_reset']);

/** The step with its manual transitions naming who made them (`by`; none: unchanged). */
export function madeBy<S extends Step>(step: S, by: string | undefined): S {
  if (by === undefined || !step.transitions.some((t) => MANUAL_REASONS.has(t.reason))) return step;
  return { ...step, transitions: step.transitions.map((t) => (MANUAL_REASONS.has(t.reason) ? { ...t, by } : t)) };
}

/**
 * The history entry of an outcome (issue 31): the outcome as the step got it, at the step's
 * `now`; nothing for a call the step refused (`callStep`: a refused call records nothing).
 */
/**
 * An outcome's step and history hook that apply it only if the circuit has not applied `seq` of
 * `source` yet, raising the source's mark in the same write (`domain/outcome-source.ts`).
 */
function onceFromSource(
  step: (current: Circuit | null) => Step,
  history: HistoryHook,
  source: string,
  seq: number,
  now: number,
): { step: (current: Circuit | null) => Step; history: HistoryHook } {
  let again = false; // set by the step, read by its history hook (each run of the step runs its hook after it)
  return {
    step: (current) => {
      again = current !== null && seenBefore(current, source, seq);
      if (again) return { circuit: current!, transitions: [] };
      const next = step(current);
      return { ...next, circuit: withSourceMark(next.circuit, source, seq, now) };
    },
    history: (before, result) => (again ? null : history(before, result)),
  };
}

export function outcomeHistory(now: number, outcome: Outcome): HistoryHook {
  return (_before, result) =>
    (result as Partial<Admission>).verdict?.allowed === false ? null : { type: 'outcome', t: now, outcome };
}

/**
 * The history entry of a policy change (issue 31): the policy before (null: the write created
 * the circuit) and after, when it changed (a force is a change); who asked.
 */
export function configureHistory(now: number, by: string | undefined): HistoryHook {
  return (before, result) => {
    const after = policyOf(result.circuit);
    if (before !== null && samePolicy(policyOf(before), after)) return null;
    return {
      type: 'manual',
      action: 'configure',
      t: now,
      ...(by === undefined ? {} : { by }),
      before: before === null ? null : policyOf(before),
      after,
    };
  };
}

/** What an outcome step needs besides the outcome: the circuit a missing one is created with, and when. */
export interface StepContext {
  readonly name: string;
  readonly settings: CircuitPolicy;
  readonly now: number;
  /** The service's settings, for the circuit's shadow (issue 31): its probe lease. Default: the built-in one. */
  readonly policy?: BreakerPolicy;
  /** With idle deletion on: refresh `updatedAt` of an unchanged circuit at most this often. */
  readonly activityStampMs?: number;
}

/**
 * The step recording one outcome, creating the circuit if missing. Every outcome, on
 * every route and the proxy, is turned into its step here.
 */
export function outcomeStep(ctx: StepContext, outcome: Outcome): (current: Circuit | null) => Step {
  const { name, settings, now, activityStampMs: stampMs } = ctx;
  // A new circuit is written even when the outcome changes nothing: the store writes
  // whenever the step's circuit is not the one it read, and it read none.
  const policy = ctx.policy ?? DEFAULT_BREAKER_POLICY;
  return (current) => {
    const step = recordOutcome(current ?? newCircuit(name, settings, now), outcome, now);
    // Idle deletion reads `updatedAt` as "last used": refresh it, at most once per stampMs.
    const stamped =
      stampMs !== undefined && current !== null && step.circuit === current && now - current.updatedAt >= stampMs
        ? { ...step, circuit: { ...current, updatedAt: now } }
        : step;
    // The shadow policy (issue 31) sees the same outcome, in the same write; a circuit without one skips shadow.ts.
    return stamped.circuit.shadow == null ? stamped : advanceShadow(current, stamped, outcome, now, policy);
  };
}

/**
 * The circuitlog `call`: admit, and when admitted record the outcome, in one step. `random`
 * is the call's one draw for soft throttling (`drawOnce`: the same however often the store runs the step).
 */
export function callStep(
  ctx: StepContext,
  outcome: Outcome,
  policy: BreakerPolicy,
  random: RandomSource,
  rampRandom: RandomSource = random,
): (current: Circuit | null) => Admission {
  const record = outcomeStep(ctx, outcome);
  return (current) => {
    const c = current ?? newCircuit(ctx.name, ctx.settings, ctx.now);
    const admission = admit(c, ctx.now, policy, outcome.caller, random, rampRandom);
    if (!admission.verdict.allowed) return admission;
    const next = record(admission.circuit);
    return {
      circuit: next.circuit,
      transitions: [...admission.transitions, ...next.transitions],
      verdict: admission.verdict,
    };
  };
}

/**
 * Decides the step an outcome stores, knowing its peers' circuits as the same write reads
 * them (null: not stored). Pure, like every step: it may run more than once.
 */
export type OutcomeGuard = (step: Step, before: Circuit | null, peers: readonly (Circuit | null)[]) => Step;

/**
 * The batch recording one outcome under a guard, in one atomic write (`applyBatch`):
 * 1. each peer is read; its step writes nothing;
 * 2. the outcome's step runs on the circuit and `guard` may change it, seeing the peers;
 * 3. when the outcome changes the circuit's state (the only steps a guard over its peers
 *    decides), each peer is written back unchanged. A store that checks only the versions
 *    of what it writes (Redis' compare-and-set) then refuses the write if a peer changed
 *    meanwhile, and runs the steps again on the peers as they are now; SQLite holds its
 *    write lock across the whole batch anyway.
 * `index` is the outcome's item, whose result is the one to answer.
 */
export function guardedItems(
  name: string,
  step: (current: Circuit | null) => Step,
  peers: readonly string[],
  guard: OutcomeGuard,
  history?: HistoryHook,
): { items: BatchItem[]; index: number } {
  const seen: (Circuit | null)[] = peers.map(() => null);
  let decided = false;
  const read = peers.map(
    (peer, i): BatchItem => ({
      name: peer,
      step: (c) => {
        seen[i] = c;
        return null;
      },
    }),
  );
  const outcome: BatchItem = {
    name,
    step: (c) => {
      const unguarded = step(c);
      decided = unguarded.transitions.some((t) => t.shadow !== true); // a shadow's (issue 31) changes no state
      return guard(unguarded, c, seen);
    },
    ...(history === undefined ? {} : { history }),
  };
  const confirm = peers.map(
    (peer): BatchItem => ({
      name: peer,
      step: (c) => (decided && c !== null ? { circuit: { ...c }, transitions: [] } : null),
    }),
  );
  return { items: [...read, outcome, ...confirm], index: read.length };
}
