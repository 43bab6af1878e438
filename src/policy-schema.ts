/**
 * The wire form (snake_case JSON, also the config file's) of a circuit's policy, its
 * validation, and RFC 7396 merge patches of it. Shared by the config loader and the HTTP
 * API; the domain's own `CircuitPolicy` stays free of any library.
 */
import { z } from 'zod';
import { BACKOFF_DEFAULTS, WINDOW_DEFAULTS, minimumCalls, type CircuitPolicy } from './domain/policy.js';
import { THROTTLE_LIMITS, resolveThrottle } from './domain/throttle.js';

const int = (min: number, max: number) => z.number().int().min(min).max(max);
const percent = z.number().gt(0).max(100);
const WINDOW_MAX_SIZE = { count: 10_000, time: 3_600 } as const; // outcomes / seconds

export const windowSchema = z
  .object({
    type: z.enum(['count', 'time']),
    size: int(1, WINDOW_MAX_SIZE.count),
    minimum_calls: int(1, 1_000_000_000).nullish(),
    failure_rate_threshold: percent.nullish(),
    slow_call_duration_ms: z.number().gt(0).max(86_400_000).nullish(), // up to 24 h
    slow_call_rate_threshold: percent.nullish(),
  })
  .strict()
  .superRefine((w, ctx) => {
    if (w.size > WINDOW_MAX_SIZE[w.type]) {
      ctx.addIssue({ code: 'custom', path: ['size'], message: `must be at most ${WINDOW_MAX_SIZE[w.type]} for a ${w.type} window` });
    }
    if (w.type === 'count' && w.minimum_calls != null && w.minimum_calls > w.size) {
      ctx.addIssue({ code: 'custom', path: ['minimum_calls'], message: 'must be at most size for a count window (it could never be reached)' });
    }
  });

export const backoffSchema = z
  .object({
    multiplier: z.number().gt(1).max(100).nullish(),
    max_timeout_seconds: int(1, 30 * 86_400).nullish(), // at most 30 days
  })
  .strict();

/** Soft throttling (`domain/throttle.ts`): a member left out (or null) takes its default (k 2, 60 s). */
export const throttleSchema = z
  .object({
    k: z.number().min(THROTTLE_LIMITS.minK).max(THROTTLE_LIMITS.maxK).nullish(),
    window_seconds: int(THROTTLE_LIMITS.minWindowSeconds, THROTTLE_LIMITS.maxWindowSeconds).nullish(),
  })
  .strict();

/** Every policy field, each with its type and bounds. */
export const policyFields = {
  failure_threshold: int(1, 1_000_000_000),
  timeout_seconds: int(1, 30 * 86_400), // at most 30 days
  half_open_max_calls: int(1, 10_000),
  success_threshold: int(1, 1_000),
  window: windowSchema.nullable(),
  backoff: backoffSchema.nullable(),
  forced_state: z.enum(['open', 'closed']).nullable(),
  throttle: throttleSchema.nullable(),
};

/** Rules across fields, for a complete policy. */
export function checkPolicy(p: { timeout_seconds: number; backoff?: z.infer<typeof backoffSchema> | null }, ctx: z.RefinementCtx): void {
  const max = p.backoff?.max_timeout_seconds;
  if (max != null && max < p.timeout_seconds) {
    ctx.addIssue({ code: 'custom', path: ['backoff', 'max_timeout_seconds'], message: `must be at least timeout_seconds (${p.timeout_seconds})` });
  }
}

/** A complete policy in wire form. */
export const policySchema = z
  .object({ ...policyFields, throttle: policyFields.throttle.optional() }) // left out: none (a policy written before it existed)
  .strict()
  .superRefine(checkPolicy);
export type PolicyWire = z.infer<typeof policySchema>;

/** Wire form to the domain's policy, filling the defaults. */
export function policyFromWire(w: PolicyWire): CircuitPolicy {
  return {
    failureThreshold: w.failure_threshold,
    timeoutSeconds: w.timeout_seconds,
    halfOpenMaxCalls: w.half_open_max_calls,
    successThreshold: w.success_threshold,
    window: w.window && {
      type: w.window.type,
      size: w.window.size,
      minimumCalls: w.window.minimum_calls ?? null,
      failureRateThreshold: w.window.failure_rate_threshold ?? WINDOW_DEFAULTS.failureRateThreshold,
      slowCallDurationMs: w.window.slow_call_duration_ms ?? null,
      slowCallRateThreshold: w.window.slow_call_rate_threshold ?? WINDOW_DEFAULTS.slowCallRateThreshold,
    },
    backoff: w.backoff && {
      multiplier: w.backoff.multiplier ?? BACKOFF_DEFAULTS.multiplier,
      maxTimeoutSeconds: w.backoff.max_timeout_seconds ?? Math.max(BACKOFF_DEFAULTS.maxTimeoutSeconds, w.timeout_seconds),
    },
    forcedState: w.forced_state,
    throttle: w.throttle == null ? null : resolveThrottle({ k: w.throttle.k ?? undefined, windowSeconds: w.throttle.window_seconds ?? undefined }),
  };
}

/**
 * The domain's policy in wire form. `resolved` (for display) spells out the window's
 * default minimum_calls; without it (a merge base) a defaulted member is left out, so it
 * keeps following its default.
 */
export function policyToWire(p: CircuitPolicy, resolved: boolean): PolicyWire {
  const w = p.window;
  return {
    failure_threshold: p.failureThreshold,
    timeout_seconds: p.timeoutSeconds,
    half_open_max_calls: p.halfOpenMaxCalls,
    success_threshold: p.successThreshold,
    window: w && {
      type: w.type,
      size: w.size,
      ...(resolved || w.minimumCalls !== null ? { minimum_calls: minimumCalls(w) } : {}),
      failure_rate_threshold: w.failureRateThreshold,
      ...(resolved || w.slowCallDurationMs !== null ? { slow_call_duration_ms: w.slowCallDurationMs } : {}),
      slow_call_rate_threshold: w.slowCallRateThreshold,
    },
    backoff: p.backoff && { multiplier: p.backoff.multiplier, max_timeout_seconds: p.backoff.maxTimeoutSeconds },
    forced_state: p.forcedState,
    throttle: p.throttle && { k: p.throttle.k, window_seconds: p.throttle.windowSeconds },
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7396 section 2: a member set to null is removed; objects merge recursively; anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

const NULLABLE = new Set(['window', 'backoff', 'forced_state', 'throttle']);

/**
 * The policy after a merge patch, unvalidated. A top-level field sent as null means
 * "none" for `window`, `backoff`, `forced_state` and `throttle` and "the default" for the others;
 * inside `window`/`backoff` a null member returns to its default.
 */
export function patchedPolicy(current: CircuitPolicy, defaults: CircuitPolicy, patch: Record<string, unknown>): unknown {
  const merged = mergePatch(policyToWire(current, false), patch) as Record<string, unknown>;
  const fallback = policyToWire(defaults, false) as Record<string, unknown>;
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) merged[key] = NULLABLE.has(key) ? null : fallback[key];
  }
  return merged;
}
