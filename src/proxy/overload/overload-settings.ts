import { ADAPTIVE_DEFAULTS, type ConcurrencyConfig, type RetryBudgetConfig } from '../../config/overload-schema.js';
import type { ConcurrencySettings } from './concurrency-gate.js';
import type { RetryBudgetSettings } from './upstream-overload.js';

/** The gate's settings from an upstream's `max_concurrent` or `concurrency` (null: no limit). */
export function concurrencySettings(u: {
  readonly max_concurrent?: number;
  readonly concurrency?: ConcurrencyConfig;
}): ConcurrencySettings | null {
  if (u.max_concurrent !== undefined) return { limit: 'fixed', max: u.max_concurrent, queueMs: 0, maxQueue: 1 };
  const c = u.concurrency;
  if (c === undefined) return null;
  if (c.limit === 'fixed') return { limit: 'fixed', max: c.max, queueMs: c.queue_ms, maxQueue: c.max_queue };
  const initial = c.initial ?? Math.min(c.max, Math.max(c.min, ADAPTIVE_DEFAULTS.initial));
  return {
    limit: 'adaptive',
    initial,
    min: c.min,
    max: c.max,
    windowMs: c.window_ms,
    probeIntervalMs: c.probe_interval_ms,
    queueMs: c.queue_ms,
    maxQueue: c.max_queue,
  };
}

export function retryBudgetSettings(b: RetryBudgetConfig): RetryBudgetSettings {
  return { percent: b.percent, minPerSecond: b.min_per_second };
}
