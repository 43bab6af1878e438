import type { ForcedState } from '../domain/policy.js';
import type { WindowPolicy } from '../domain/policy.js';
import { currentThrottleProbability, type ThrottlePolicy, type ThrottleState } from '../domain/throttle.js';
import { windowFigures, type WindowState } from '../domain/window.js';

/**
 * The policy columns of a circuits-table row (migration 0003) as the metrics read them,
 * straight from the row: the gauges never build whole circuits for 10,000 rows.
 */

/** The row's forced state, or null. */
export function forcedStateOfRow(row: Readonly<Record<string, unknown>>): ForcedState | null {
  const value = row.forced_state;
  return value === 'open' || value === 'closed' ? value : null;
}

/** The row's window failure rate in percent as of `now` (expired time buckets left out), or null without a window. */
export function failureRateOfRow(row: Readonly<Record<string, unknown>>, now: number): number | null {
  if (typeof row.window_policy !== 'string') return null;
  const window = JSON.parse(row.window_policy) as WindowPolicy;
  const state = typeof row.window_state === 'string' ? (JSON.parse(row.window_state) as WindowState) : null;
  return windowFigures(window, state, now).failureRate;
}

/**
 * The row's soft-throttle refusal probability as of `now` (migration 0006), or null without
 * a throttle. 0 unless closed and unforced: only then does the throttle decide.
 */
export function throttleProbabilityOfRow(row: Readonly<Record<string, unknown>>, now: number): number | null {
  if (typeof row.throttle_policy !== 'string') return null;
  if (row.effective_state !== 'closed' || forcedStateOfRow(row) !== null) return 0;
  const throttle = JSON.parse(row.throttle_policy) as ThrottlePolicy;
  const state = typeof row.throttle_state === 'string' ? (JSON.parse(row.throttle_state) as ThrottleState) : null;
  return currentThrottleProbability(throttle, state, now);
}
