/**
 * The config file's overload keys of an upstream (issue 21): `concurrency` (a fixed or an
 * adaptive limit on requests in flight) and `retry_budget`. docs/proxy.md#overload-control.
 */
import { z } from 'zod';

const count = (max: number) => z.number().int().min(1).max(max);

/** Shared by both limits: how long a request over the limit may wait for a slot, and how many may. */
const queueFields = {
  /** 0: refuse at once (503 concurrency-limited); else wait up to this long, oldest first. */
  queue_ms: z.number().int().min(0).max(60_000).default(0),
  /** Requests waiting at once; one more is refused (a bound on what waiters hold). */
  max_queue: count(100_000).default(1_000),
};

const fixedSchema = z
  .object({
    limit: z.literal('fixed'),
    max: z
      .number({ error: (issue) => (issue.input === undefined ? 'required with limit: fixed' : undefined) })
      .int()
      .min(1)
      .max(1_000_000),
    ...queueFields,
  })
  .strict();

export const ADAPTIVE_DEFAULTS = {
  initial: 20,
  min: 5,
  max: 1_000,
  window_ms: 100,
  probe_interval_ms: 30_000,
} as const;

const adaptiveSchema = z
  .object({
    limit: z.literal('adaptive'),
    /** Where the limit starts; default 20 (Netflix concurrency-limits), within min..max. */
    initial: count(1_000_000).optional(),
    min: count(1_000_000).default(ADAPTIVE_DEFAULTS.min),
    max: count(1_000_000).default(ADAPTIVE_DEFAULTS.max),
    /** Shortest sampling window; a window also needs 10 answers. */
    window_ms: count(60_000).default(ADAPTIVE_DEFAULTS.window_ms), // 100 ms
    /** Longest time the no-load latency goes unmeasured while the limit refuses. */
    probe_interval_ms: count(3_600_000).default(ADAPTIVE_DEFAULTS.probe_interval_ms), // 30 s
    ...queueFields,
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.min > c.max) ctx.addIssue({ code: 'custom', path: ['min'], message: `must not exceed max (${c.max})` });
    if (c.initial !== undefined && (c.initial < c.min || c.initial > c.max))
      ctx.addIssue({ code: 'custom', path: ['initial'], message: `must be within min..max (${c.min}..${c.max})` });
  });

export const concurrencySchema = z.discriminatedUnion('limit', [fixedSchema, adaptiveSchema], {
  error: (issue) => (issue.code === 'invalid_union' ? "limit must be 'fixed' (with max) or 'adaptive'" : undefined),
});

export const retryBudgetSchema = z
  .object({
    /** Retries as a share of the upstream's requests over the last 10 s (Envoy, Linkerd, Finagle: 20). */
    percent: z.number().min(0).max(100).default(20),
    /** Retries per second allowed whatever the traffic. */
    min_per_second: z.number().min(0).max(100_000).default(3),
  })
  .strict();

export type ConcurrencyConfig = z.infer<typeof concurrencySchema>;
export type RetryBudgetConfig = z.infer<typeof retryBudgetSchema>;

/** For the upstream schema's superRefine: `max_concurrent` and `concurrency` are two spellings of one limit. */
export function checkOneLimit(
  u: { readonly max_concurrent?: number; readonly concurrency?: unknown },
  ctx: z.RefinementCtx,
): void {
  if (u.max_concurrent !== undefined && u.concurrency !== undefined) {
    ctx.addIssue({
      code: 'custom',
      path: ['max_concurrent'],
      message:
        'set either max_concurrent or concurrency, not both (max_concurrent: N is concurrency: { limit: fixed, max: N })',
    });
  }
}
