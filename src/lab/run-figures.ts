/**
 * A replay's figures (`RunFigures`), gathered as it goes: openings and their episodes, time
 * open, flaps, detection times, the transitions and the per-minute series.
 */
import type { CircuitPolicy } from '../domain/policy.js';
import type { CircuitState, EpochMs, Transition } from '../domain/types.js';
import type { LabTransition, MinuteFigures, RunFigures } from './backtest-types.js';
import type { DecodedHistory } from './history-decode.js';

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

/** Most transitions a run lists (`transitions_total` counts them all). */
export const MAX_LISTED_TRANSITIONS = 10_000;
/** Most points of a series: past it a point covers several minutes (`series_bucket_ms`). */
export const MAX_SERIES_POINTS = 10_080; // a week of minutes
const MINUTE_MS = 60_000;

/** A transition as the lab answers it. */
export const labTransition = (tr: Transition): LabTransition => ({
  from: tr.from,
  to: tr.to,
  reason: tr.reason,
  at: tr.at,
});

/** A run's figures, gathered as the replay goes (see `RunFigures`). */
export class Figures {
  private readonly bucketMs: number;
  private readonly seriesStart: number;
  private readonly calls: Int32Array;
  private readonly failures: Int32Array;
  private readonly refused: Int32Array;
  private readonly openMs: Float64Array;
  private readonly halfOpenMs: Float64Array;
  private state: CircuitState = 'closed';
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
      if (run.detection_ms.length < MAX_LISTED_TRANSITIONS) run.detection_ms.push(tr.at - this.episodeBurstAt);
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
  private spend(state: CircuitState, a: number, b: number): void {
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
