import type { ForcedState } from '../domain/policy.js';
import type { WindowPolicy } from '../domain/policy.js';
import { windowFigures, type WindowState } from '../domain/window.js';
import type { CallerEntry } from '../domain/caller-state.js';

/**
 * The policy columns of a circuits-table row (migration 0003) as the metrics read them,
 * straight from the row: the gauges never build whole circuits for 10,000 rows.
 */

/** The row's forced state, or null. */
export function forcedStateOfRow(row: Readonly<Record<string, unknown>>): ForcedState | null {
  const value = row.forced_state;
  return value === 'open' || value === 'closed' ? value : null;
}

/** How many callers the row's circuit isolates now (issue 17), or null without a quorum. */
export function isolatedCallersOfRow(row: Readonly<Record<string, unknown>>): number | null {
  if (typeof row.quorum_policy !== 'string') return null;
  if (typeof row.callers !== 'string') return 0;
  return (JSON.parse(row.callers) as CallerEntry[]).filter((e) => e[4] !== null).length;
}

/** The row's window failure rate in percent as of `now` (expired time buckets left out), or null without a window. */
export function failureRateOfRow(row: Readonly<Record<string, unknown>>, now: number): number | null {
  if (typeof row.window_policy !== 'string') return null;
  const window = JSON.parse(row.window_policy) as WindowPolicy;
  const state = typeof row.window_state === 'string' ? (JSON.parse(row.window_state) as WindowState) : null;
  return windowFigures(window, state, now).failureRate;
}
