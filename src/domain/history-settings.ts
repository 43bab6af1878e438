/**
 * The outcome history's settings (config `history`, issue 31; docs/operations.md#history) and
 * the one rule of whether a circuit's writes are kept in it. Both stores and the service read them.
 */
import type { Circuit } from './types.js';

export interface HistorySettings {
  /** Keep a history at all (the circuit's own policy field `history` may still turn it off). */
  readonly enabled: boolean;
  /** Entries kept per circuit, oldest dropped first (a store's documented slack over it). */
  readonly maxOutcomes: number;
  /** Entries older than this are dropped, in hours. */
  readonly maxAgeHours: number;
}

/** The defaults, written once: on, 200,000 entries, 168 h (7 days). */
export const HISTORY_DEFAULTS: HistorySettings = {
  enabled: true,
  maxOutcomes: 200_000,
  maxAgeHours: 168, // 7 days
};

/** Whether a write that leaves `circuit` is kept in the history: the config on, and the circuit not opted out. */
export function keepsHistory(settings: HistorySettings, circuit: Circuit): boolean {
  return settings.enabled && circuit.history !== false;
}
