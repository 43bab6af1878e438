/**
 * The policy lab's replay (issue 31, docs/policy-lab.md): a circuit's recorded history run
 * again through the domain's own pure state machine (`admit`, `recordOutcome`, `configure`,
 * `reset`, `refresh`, `newCircuit`; never a copy of the rules), with the policy that was live
 * or a proposed one, and what each did.
 *
 * - An outcome at `t`: the replay admits the call (`admit`, with draws that always admit:
 *   throttle and ramp draws are not modelled) and, admitted, records it at the same `t`
 *   (`/call`'s semantics). Refused, it is counted in `refused_calls` and not fed, unless the
 *   recorded circuit refused at that moment too (the live replay refused it: the server then
 *   took it as a late outcome), when it is fed as the server fed it.
 * - A `configure`: the live replay applies its `after`; a proposed replay keeps its policy and
 *   applies only the force (a person stepped in). A `reset` is applied by both.
 * - A recorded transition: both replays refresh to its entry's time (a read, the due job).
 * - At the end, a refresh to `to` (the due job's open -> half_open stamped at `openUntil`).
 */
import {
  admit,
  configure,
  newCircuit,
  recordOutcome,
  refresh,
  reset,
  type Circuit,
  type Transition,
} from '../domain/circuit.js';
import { decodeEntry, type HistoryManual, type StoredEntry } from '../domain/history.js';
import type { CircuitPolicy } from '../domain/policy.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import type { BreakerPolicy, EpochMs, Outcome } from '../domain/types.js';
import type { Fidelity, LabTransition, MinuteFigures, RunFigures } from './backtest-types.js';

/** Entry types of a decoded history (`DecodedHistory.types`). */
export const OUTCOME = 0;
export const MANUAL = 1;
export const TRANSITION = 2;

/**
 * A history decoded once for every replay of it, as parallel arrays (a million entries
 * cost a few bytes each beyond their payload; identical outcome texts share one object).
 */
export interface DecodedHistory {
  readonly circuit: string;
  /** Per entry: OUTCOME, MANUAL or TRANSITION. */
  readonly types: Uint8Array;
  /** Per entry: its `t`, epoch ms. */
  readonly times: Float64Array;
  /** Per entry: the outcome, the manual action or the transition. */
  readonly items: readonly (Outcome | HistoryManual | Transition)[];
  /** Outcome entries among them. */
  readonly outcomes: number;
  /** Stored texts `decodeEntry` could not read: skipped. */
  readonly skipped: number;
  readonly from: EpochMs;
  readonly to: EpochMs;
  /** `created`: the range starts with the circuit's first entry; else the start is assumed closed and empty. */
  readonly start: 'created' | 'assumed_closed';
}

/** How one replay runs: with the live policy (and its recorded changes), or one proposed policy throughout. */
export type ReplayPlan =
  | { readonly kind: 'live'; readonly current: CircuitPolicy }
  | { readonly kind: 'proposed'; readonly policy: CircuitPolicy; readonly live: ReplayRun };

/** One replay's figures, and per outcome (in order) whether it refused the call. */
export interface ReplayRun {
  readonly figures: RunFigures;
  /** Per outcome entry (the n-th outcome at index n): 1 when this replay refused the call. */
  readonly refused: Uint8Array;
  /** The replay's transitions made while replaying entries (not the final refresh to `to`), outside manual ones: what fidelity compares. */
  readonly judged: readonly LabTransition[];
  /** Each opening (closed -> open) until the closing after it: its start, end and time in state open, ms. */
  readonly episodes: readonly Episode[];
}

/** One opening of a replay until it closed again (or the range ended). */
export interface Episode {
  readonly openedAt: EpochMs;
  readonly closedAt: EpochMs;
  /** Time in state open (half-open left out), ms: over one open time means a probe failed. */
  readonly openMs: number;
  /** The first failure of the burst that caused it. */
  readonly burstAt: EpochMs;
  /** The open time of the policy in force at the opening, ms. */
  readonly timeoutMs: number;
}

/** Transitions a person's action makes: manual actions, not judged by fidelity. */
export const MANUAL_REASONS: ReadonlySet<string> = new Set([
  'forced_open',
  'forced_closed',
  'force_cleared',
  'manual_reset',
]);

/** Most transitions a run lists (`transitions_total` counts them all). */
export const MAX_LISTED_TRANSITIONS = 10_000;
/** Most points of a series: past it a point covers several minutes (`series_bucket_ms`). */
export const MAX_SERIES_POINTS = 10_080; // a week of minutes
const MINUTE_MS = 60_000;
/** Outcome texts remembered while decoding (identical texts share one object). */
const DECODE_CACHE_MAX = 4_096;

const BREAKER: BreakerPolicy = { probeLeaseMs: POLICY_DEFAULTS.probeLeaseSeconds * 1000 };
/** The throttle refuses when a draw is below its probability: 1 never is. */
const ALWAYS_UNTHROTTLED = () => 1;
/** The ramp admits when a draw (times 100) is below its share: 0 always is, but at a 0 % share. */
const ALWAYS_RAMPED = () => 0;

/** The stored entries with `from <= t < to`, decoded (undecodable ones skipped and counted). */
export function decodeHistory(
  circuit: string,
  entries: readonly StoredEntry[],
  from: EpochMs,
  to: EpochMs,
  createdAt?: EpochMs,
): DecodedHistory {
  let n = 0;
  for (const e of entries) if (e.t >= from && e.t < to) n++;
  const types = new Uint8Array(n);
  const times = new Float64Array(n);
  const items: (Outcome | HistoryManual | Transition)[] = new Array(n);
  const cache = new Map<string, Outcome>();
  let k = 0;
  let outcomes = 0;
  let skipped = 0;
  for (const { t, text } of entries) {
    if (!(t >= from && t < to)) continue;
    const cached = cache.get(text);
    if (cached !== undefined) {
      types[k] = OUTCOME;
      times[k] = t;
      items[k++] = cached;
      outcomes++;
      continue;
    }
    const e = decodeEntry(t, text);
    if (e === null) {
      skipped++;
      continue;
    }
    times[k] = t;
    if (e.type === 'outcome') {
      types[k] = OUTCOME;
      items[k++] = e.outcome;
      outcomes++;
      // An outcome with `at` is stored relative to its t: only others read the same at any t.
      if (e.outcome.at === undefined && cache.size < DECODE_CACHE_MAX) cache.set(text, e.outcome);
    } else if (e.type === 'manual') {
      types[k] = MANUAL;
      items[k++] = e;
    } else {
      types[k] = TRANSITION;
      items[k++] = e.transition;
    }
  }
  const first = items[0] as HistoryManual | undefined;
  const createdHere =
    k > 0 &&
    ((createdAt !== undefined && times[0] === createdAt) ||
      (types[0] === MANUAL && first!.action === 'configure' && first!.before === null));
  return {
    circuit,
    types: types.subarray(0, k),
    times: times.subarray(0, k),
    items: k === n ? items : items.slice(0, k),
    outcomes,
    skipped,
    from,
    to,
    start: createdHere ? 'created' : 'assumed_closed',
  };
}

/** The live policy at the range's start: the `before` of its first policy change, else the current one. */
export function startPolicy(history: DecodedHistory, current: CircuitPolicy): CircuitPolicy {
  for (let i = 0; i < history.types.length; i++) {
    if (history.types[i] !== MANUAL) continue;
    const m = history.items[i] as HistoryManual;
    if (m.action === 'configure') return m.before ?? m.after ?? current;
  }
  return current;
}

/** Replay the history under `plan` (see the file's comment). */
export function replay(history: DecodedHistory, plan: ReplayPlan): ReplayRun {
  const { types, times, items } = history;
  const live = plan.kind === 'live';
  const initial = startPolicy(history, live ? plan.current : plan.policy);
  const liveRefused = live ? null : plan.live.refused;
  // A proposed replay keeps its policy; the forces are the recorded ones.
  let policy: CircuitPolicy = live ? initial : { ...plan.policy, forcedState: initial.forcedState };
  const figures = new Figures(history);
  const refused = new Uint8Array(history.outcomes);
  const judged: LabTransition[] = [];
  const note = (transitions: readonly Transition[]): void => {
    for (const tr of transitions) {
      figures.transition(tr, policy);
      if (!MANUAL_REASONS.has(tr.reason)) judged.push(labTransition(tr));
    }
  };
  if (types.length === 0) return { figures: figures.done(history.to), refused, judged, episodes: figures.episodes };
  const first = items[0] as HistoryManual;
  const createdByConfigure = types[0] === MANUAL && first.action === 'configure' && first.before === null;
  // A circuit a PATCH created starts unforced, so the force it was created with is an event.
  let c: Circuit = newCircuit(
    history.circuit,
    createdByConfigure ? { ...policy, forcedState: null } : policy,
    times[0]!,
  );
  let n = 0;
  for (let i = 0; i < types.length; i++) {
    const t = times[i]!;
    const type = types[i];
    if (type === OUTCOME) {
      const outcome = items[i] as Outcome;
      figures.outcome(t, outcome.success);
      const admission = admit(c, t, BREAKER, outcome.caller, ALWAYS_UNTHROTTLED, ALWAYS_RAMPED);
      if (admission.transitions.length > 0) note(admission.transitions);
      if (admission.verdict.allowed) {
        const step = recordOutcome(admission.circuit, outcome, t);
        if (step.transitions.length > 0) note(step.transitions);
        c = step.circuit;
      } else {
        refused[n] = 1;
        figures.refusedCall(t);
        c = admission.circuit;
        // The recorded circuit refused it too, and took it as the server takes a late outcome.
        if (live || liveRefused![n] === 1) {
          const step = recordOutcome(c, outcome, t);
          if (step.transitions.length > 0) note(step.transitions);
          c = step.circuit;
        }
      }
      n++;
    } else if (type === MANUAL) {
      const m = items[i] as HistoryManual;
      const refreshed = refresh(c, t);
      if (refreshed.transitions.length > 0) note(refreshed.transitions);
      c = refreshed.circuit;
      if (m.action === 'reset') {
        const step = reset(c, t);
        if (step.transitions.length > 0) note(step.transitions);
        c = step.circuit;
      } else if (m.after !== undefined) {
        policy = live ? m.after : { ...policy, forcedState: m.after.forcedState };
        const step = configure(c, policy, t);
        if (step.transitions.length > 0) note(step.transitions);
        c = step.circuit;
      }
    } else {
      const refreshed = refresh(c, t);
      if (refreshed.transitions.length > 0) note(refreshed.transitions);
      c = refreshed.circuit;
    }
  }
  const end = refresh(c, history.to);
  for (const tr of end.transitions) figures.transition(tr, policy);
  return { figures: figures.done(history.to), refused, judged, episodes: figures.episodes };
}

/** The recorded transitions of the range, outside manual ones (what the live replay must reproduce). */
export function recordedTransitions(history: DecodedHistory): LabTransition[] {
  const out: LabTransition[] = [];
  for (let i = 0; i < history.types.length; i++) {
    if (history.types[i] !== TRANSITION) continue;
    const tr = history.items[i] as Transition;
    if (!MANUAL_REASONS.has(tr.reason)) out.push(labTransition(tr));
  }
  return out;
}

/**
 * The live replay's transitions against the recorded ones, in order by (from, to, reason, at):
 * equal ones match; at a difference the earlier one is passed over (missing from the other
 * side) and the comparison goes on, so one difference is not counted twice.
 */
export function fidelity(history: DecodedHistory, live: ReplayRun): Fidelity {
  const recorded = recordedTransitions(history);
  const replayed = live.judged;
  let matched = 0;
  let firstMismatch: Fidelity['first_mismatch'] = null;
  let i = 0;
  let j = 0;
  while (i < recorded.length || j < replayed.length) {
    const a = recorded[i];
    const b = replayed[j];
    if (a !== undefined && b !== undefined && sameTransition(a, b)) {
      matched++;
      i++;
      j++;
      continue;
    }
    firstMismatch ??= { recorded: a ?? null, replayed: b ?? null };
    if (a === undefined) j++;
    else if (b === undefined) i++;
    else if (a.at < b.at) i++;
    else if (b.at < a.at) j++;
    else {
      i++;
      j++;
    }
  }
  let manual = 0;
  for (const type of history.types) if (type === MANUAL) manual++;
  return {
    matched,
    recorded: recorded.length,
    ratio: recorded.length === 0 ? 1 : matched / recorded.length,
    first_mismatch: firstMismatch,
    manual_actions: manual,
  };
}

const sameTransition = (a: LabTransition, b: LabTransition): boolean =>
  a.at === b.at && a.from === b.from && a.to === b.to && a.reason === b.reason;

const labTransition = (tr: Transition): LabTransition => ({ from: tr.from, to: tr.to, reason: tr.reason, at: tr.at });

/** A run's figures, gathered as the replay goes (see `RunFigures`). */
class Figures {
  private readonly bucketMs: number;
  private readonly seriesStart: number;
  private readonly calls: Int32Array;
  private readonly failures: Int32Array;
  private readonly refused: Int32Array;
  private readonly openMs: Float64Array;
  private readonly halfOpenMs: Float64Array;
  private state: Circuit['state'] = 'closed';
  private stateSince: number;
  private openedAt: number | null = null;
  private lastClosedAt: number | null = null;
  private burstStart: number | null = null;
  private episodeOpenMs = 0;
  private episodeBurstAt = 0;
  private episodeTimeoutMs = 0;
  readonly episodes: Episode[] = [];
  private readonly run: RunFigures;

  constructor(history: DecodedHistory) {
    const firstT = history.times.length > 0 ? history.times[0]! : history.from;
    const start = Math.max(history.from, Math.min(firstT, history.to));
    const minutes = Math.max(1, Math.ceil((history.to - Math.floor(start / MINUTE_MS) * MINUTE_MS) / MINUTE_MS));
    this.bucketMs = MINUTE_MS * Math.ceil(minutes / MAX_SERIES_POINTS);
    this.seriesStart = Math.floor(start / this.bucketMs) * this.bucketMs;
    const points = Math.max(1, Math.ceil((history.to - this.seriesStart) / this.bucketMs));
    this.calls = new Int32Array(points);
    this.failures = new Int32Array(points);
    this.refused = new Int32Array(points);
    this.openMs = new Float64Array(points);
    this.halfOpenMs = new Float64Array(points);
    this.stateSince = start;
    this.run = {
      openings: 0,
      time_open_ms: 0,
      longest_open_ms: 0,
      refused_calls: 0,
      flaps: 0,
      detection_ms: [],
      transitions: [],
      transitions_total: 0,
      series: [],
      series_bucket_ms: this.bucketMs,
    };
  }

  private point(t: number): number {
    const p = Math.floor((t - this.seriesStart) / this.bucketMs);
    return p < 0 ? 0 : p >= this.calls.length ? this.calls.length - 1 : p;
  }

  outcome(t: number, success: boolean): void {
    const p = this.point(t);
    this.calls[p]!++;
    if (success) this.burstStart = null;
    else {
      this.failures[p]!++;
      this.burstStart ??= t;
    }
  }

  refusedCall(t: number): void {
    this.run.refused_calls++;
    this.refused[this.point(t)]!++;
  }

  transition(tr: Transition, policy: CircuitPolicy): void {
    const run = this.run;
    run.transitions_total++;
    if (run.transitions.length < MAX_LISTED_TRANSITIONS) run.transitions.push(labTransition(tr));
    if (tr.from === tr.to) return;
    this.spend(this.state, this.stateSince, tr.at);
    if (this.state === 'open') this.episodeOpenMs += Math.max(0, tr.at - this.stateSince);
    this.state = tr.to;
    this.stateSince = Math.max(this.stateSince, tr.at);
    if (tr.from === 'closed') {
      run.openings++;
      this.openedAt = tr.at;
      this.episodeOpenMs = 0;
      this.episodeBurstAt = this.burstStart ?? tr.at;
      this.episodeTimeoutMs = policy.timeoutSeconds * 1000;
      run.detection_ms.push(tr.at - this.episodeBurstAt);
      if (this.lastClosedAt !== null && tr.at - this.lastClosedAt < policy.timeoutSeconds * 1000) run.flaps++;
    } else if (tr.to === 'closed') {
      this.closeEpisode(tr.at);
      this.lastClosedAt = tr.at;
      this.burstStart = null;
    }
  }

  private closeEpisode(at: number): void {
    if (this.openedAt === null) return;
    const ms = at - this.openedAt;
    this.run.time_open_ms += ms;
    if (ms > this.run.longest_open_ms) this.run.longest_open_ms = ms;
    this.episodes.push({
      openedAt: this.openedAt,
      closedAt: at,
      openMs: this.episodeOpenMs,
      burstAt: this.episodeBurstAt,
      timeoutMs: this.episodeTimeoutMs,
    });
    this.openedAt = null;
  }

  /** Adds the time from `a` to `b` spent in `state` to the points it covers. */
  private spend(state: Circuit['state'], a: number, b: number): void {
    if (state === 'closed' || b <= a) return;
    const into = state === 'open' ? this.openMs : this.halfOpenMs;
    let t = Math.max(a, this.seriesStart);
    while (t < b) {
      const p = this.point(t);
      const pointEnd = this.seriesStart + (p + 1) * this.bucketMs;
      const until = p === this.calls.length - 1 ? b : Math.min(b, pointEnd);
      into[p]! += until - t;
      t = until;
    }
  }

  done(to: EpochMs): RunFigures {
    this.spend(this.state, this.stateSince, to);
    if (this.state === 'open') this.episodeOpenMs += Math.max(0, to - this.stateSince);
    if (this.state !== 'closed') this.closeEpisode(Math.max(to, this.openedAt ?? to));
    const series: MinuteFigures[] = [];
    for (let p = 0; p < this.calls.length; p++) {
      series.push({
        t: this.seriesStart + p * this.bucketMs,
        outcomes: this.calls[p]!,
        failures: this.failures[p]!,
        refused: this.refused[p]!,
        open_ms: this.openMs[p]!,
        half_open_ms: this.halfOpenMs[p]!,
      });
    }
    this.run.series = series;
    return this.run;
  }
}
