/**
 * A grid's candidates evaluated (each replayed against the live replay's outages) and ranked by
 * the grid's objective. Split so a grid's shares can be evaluated in several worker threads
 * (backtest-worker.ts) and ranked once all are in: `grid` (backtest.ts) is `rankGrid` of one
 * share holding every candidate, so both give the same answer.
 */
import { AppError } from '../domain/errors.js';
import type { BacktestInput, GridCandidate, GridResult, RunFigures } from './backtest-types.js';
import { decodeHistory, type Episode, replay, type ReplayRun } from './replay.js';

/** Most candidates a grid may hold (more: BAD_REQUEST). */
export const GRID_MAX_COMBINATIONS = 100;

/** An outage counts as caught when a candidate opens within this long of its start, by default. */
export const DEFAULT_DETECT_WITHIN_SECONDS = 60;

/** The objective a grid ranks by, as its answer states it. */
export function gridObjective(detectWithinSeconds: number): string {
  return (
    `Outages are the live replay's openings that stayed open longer than one open time (a probe failed). ` +
    `A candidate meets the objective when it is open within ${detectWithinSeconds} s of the start of every outage ` +
    '(the first failure of its burst). Ranked: candidates that meet it first, by fewest refused calls, then fewest ' +
    'openings, then shortest mean detection; then the others by most outages caught, then fewest refused calls.'
  );
}

/** One candidate evaluated: its index in the grid, its figures and the outages it caught. */
export interface ScoredCandidate {
  readonly index: number;
  readonly figures: Omit<RunFigures, 'series' | 'transitions'>;
  readonly caught: number;
}

/**
 * A share of a grid evaluated (`evaluateCandidates`): what the live replay found (the same in
 * every share) and the candidates `[start, end)`, scored. Plain data: it crosses from a thread.
 */
export interface GridShare {
  readonly outcomes: number;
  readonly start: 'created' | 'assumed_closed';
  readonly skipped: number;
  readonly outages: number;
  readonly current: Omit<RunFigures, 'series' | 'transitions'>;
  readonly scored: readonly ScoredCandidate[];
}

/** Candidates `[start, end)` of `input.proposed`, each replayed and scored against the live replay's outages. */
export function evaluateCandidates(input: BacktestInput, start = 0, end: number = input.proposed.length): GridShare {
  if (input.proposed.length > GRID_MAX_COMBINATIONS)
    throw new AppError('BAD_REQUEST', `At most ${GRID_MAX_COMBINATIONS} candidates are backtested at once.`);
  const within = detectWithinMs(input);
  const history = decodeHistory(input.circuit, input.entries, input.from, input.to, input.createdAt);
  const live = replay(history, { kind: 'live', current: input.current });
  const outages = live.episodes.filter((e) => e.openMs > e.timeoutMs);
  const scored: ScoredCandidate[] = [];
  for (let i = start; i < Math.min(end, input.proposed.length); i++) {
    const run = replay(history, { kind: 'proposed', policy: input.proposed[i]!, live });
    scored.push({
      index: i,
      figures: summary(run.figures),
      caught: outages.filter((o) => caughtBy(o, run, within)).length,
    });
  }
  return {
    outcomes: history.outcomes,
    start: history.start,
    skipped: history.skipped,
    outages: outages.length,
    current: summary(live.figures),
    scored,
  };
}

/**
 * The grid's answer from its evaluated shares (in any order; together they must score every
 * candidate once): ranked by the objective (see `gridObjective`).
 */
export function rankGrid(
  input: Omit<BacktestInput, 'entries'>,
  values: readonly Readonly<Record<string, number>>[],
  shares: readonly GridShare[],
  id: string,
): GridResult {
  const first = shares[0];
  if (first === undefined) throw new AppError('INTERNAL', 'A grid was ranked without its evaluation.');
  const scored = shares.flatMap((s) => s.scored).sort((a, b) => a.index - b.index);
  if (scored.length !== input.proposed.length || scored.some((s, i) => s.index !== i))
    throw new AppError('INTERNAL', 'A grid was ranked without every candidate evaluated once.');
  const outages = first.outages;
  const meets = (s: ScoredCandidate) => s.caught === outages;
  const meanDetection = (f: Omit<RunFigures, 'series' | 'transitions'>) =>
    f.detection_ms.length === 0 ? 0 : f.detection_ms.reduce((a, b) => a + b, 0) / f.detection_ms.length;
  const order = [...scored].sort((a, b) => {
    if (meets(a) !== meets(b)) return meets(a) ? -1 : 1;
    if (meets(a))
      return (
        a.figures.refused_calls - b.figures.refused_calls ||
        a.figures.openings - b.figures.openings ||
        meanDetection(a.figures) - meanDetection(b.figures) ||
        a.index - b.index
      );
    return b.caught - a.caught || a.figures.refused_calls - b.figures.refused_calls || a.index - b.index;
  });
  const candidates: GridCandidate[] = order.map((s, rank) => ({
    values: values[s.index] ?? {},
    figures: s.figures,
    outages_caught: s.caught,
    meets_objective: meets(s),
    rank: rank + 1,
  }));
  return {
    id,
    circuit: input.circuit,
    from: input.from,
    to: input.to,
    outcomes: first.outcomes,
    start: first.start,
    skipped: first.skipped,
    objective: gridObjective(detectWithinMs(input) / 1000),
    outages,
    current: first.current,
    candidates,
  };
}

const detectWithinMs = (input: Pick<BacktestInput, 'detectWithinSeconds'>): number =>
  (input.detectWithinSeconds ?? DEFAULT_DETECT_WITHIN_SECONDS) * 1000;

/** Was the candidate open (or half-open) at some moment within `withinMs` of the outage's start? */
function caughtBy(outage: Episode, run: ReplayRun, withinMs: number): boolean {
  const start = outage.burstAt;
  // Episodes are in time order and apart: only the last one opened by start + withinMs can reach start.
  const episodes = run.episodes;
  let lo = 0;
  let hi = episodes.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (episodes[mid]!.openedAt <= start + withinMs) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && episodes[lo - 1]!.closedAt >= start;
}

function summary(f: RunFigures): Omit<RunFigures, 'series' | 'transitions'> {
  const { series: _series, transitions: _transitions, ...rest } = f;
  return rest;
}
