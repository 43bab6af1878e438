/** The config file's `history:` section (issue 31): the outcome history the policy lab replays. */
import { z } from 'zod';
import { HISTORY_DEFAULTS, type HistorySettings } from '../domain/history-settings.js';
import { positiveInt } from './fields.js';

export const historySchema = z
  .object({
    /** Keep every circuit's outcomes, manual actions and transitions (a circuit may opt out: policy `history`). */
    enabled: z.boolean().default(HISTORY_DEFAULTS.enabled),
    /** Entries kept per circuit, oldest dropped first. */
    max_outcomes: positiveInt(100_000_000).default(HISTORY_DEFAULTS.maxOutcomes),
    /** Entries older than this are dropped, in hours (at most 10 years). */
    max_age_hours: positiveInt(87_600).default(HISTORY_DEFAULTS.maxAgeHours), // 168 h: 7 days
  })
  .strict();

export type HistoryConfig = z.infer<typeof historySchema>;

/** The section as the stores and the service take it. */
export function historySettings(h: HistoryConfig): HistorySettings {
  return { enabled: h.enabled, maxOutcomes: h.max_outcomes, maxAgeHours: h.max_age_hours };
}
