/**
 * The policy fields of issue 8 (forced state, window) as the metrics and dashboard read
 * them. Until that work is merged these fields do not exist; every reader here tolerates
 * their absence and answers "none", so this file is the one place to wire them up.
 */

export type ForcedState = 'open' | 'closed';

/** A circuits-table row's forced state (column `forced_state`), or null. */
export function forcedStateOfRow(row: Readonly<Record<string, unknown>>): ForcedState | null {
  const value = row.forced_state;
  return value === 'open' || value === 'closed' ? value : null;
}

/** A circuits-table row's window failure rate in percent as of `now`, or null without a window. */
export function failureRateOfRow(row: Readonly<Record<string, unknown>>, now: number): number | null {
  void row;
  void now;
  return null;
}

/** The slow-call threshold of a circuit (domain object), or null when it has none. */
export function slowCallDurationMsOf(circuit: object): number | null {
  const window = (circuit as { window?: { slowCallDurationMs?: number | null } | null }).window;
  return window?.slowCallDurationMs ?? null;
}
