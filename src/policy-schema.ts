/**
 * Validation of a circuit's policy in its wire form (snake_case JSON, also the config
 * file's), shared by the config loader and the HTTP API. The mapping to the domain's
 * `CircuitPolicy` and its defaults are the domain's (`domain/policy-wire.ts`,
 * `domain/policy-defaults.ts`); zod stays here, at the edges.
 */
import { z } from 'zod';
import type { PolicyWire } from './domain/policy-wire.js';
import { THROTTLE_LIMITS } from './domain/throttle.js';
import { QUORUM_LIMITS } from './domain/quorum.js';
import { OUTCOME_KINDS } from './domain/outcome-kind.js';

export { policyFromWire, policyToWire, type PolicyWire } from './domain/policy-wire.js';
export { mergePatch, patchedPolicy } from './domain/policy-patch.js';

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
      ctx.addIssue({
        code: 'custom',
        path: ['size'],
        message: `must be at most ${WINDOW_MAX_SIZE[w.type]} for a ${w.type} window`,
      });
    }
    if (w.type === 'count' && w.minimum_calls != null && w.minimum_calls > w.size) {
      ctx.addIssue({
        code: 'custom',
        path: ['minimum_calls'],
        message: 'must be at most size for a count window (it could never be reached)',
      });
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

const [minCallersMin, minCallersMax] = QUORUM_LIMITS.minCallers;
const [maxCallersMin, maxCallersMax] = QUORUM_LIMITS.maxCallers;
export const quorumSchema = z
  .object({
    min_callers: int(minCallersMin, minCallersMax),
    window_seconds: int(...QUORUM_LIMITS.windowSeconds).nullish(),
    max_callers: int(maxCallersMin, maxCallersMax).nullish(),
  })
  .strict()
  .superRefine((q, ctx) => {
    if (q.max_callers != null && q.max_callers < q.min_callers) {
      ctx.addIssue({
        code: 'custom',
        path: ['max_callers'],
        message: `must be at least min_callers (${q.min_callers}): a quorum it could never hold`,
      });
    }
  });

/** `ramp` (issue 29): the shared slow start; `start_percent` left out (or null) is 10. */
export const rampSchema = z
  .object({
    seconds: int(1, 3_600), // up to 1 h
    start_percent: int(1, 100).nullish(),
  })
  .strict();

const countAsTarget = z.enum(['success', 'failure', 'ignore']);

/** `count_as`: only the overrides, kind -> what it counts as; an unknown kind is named (`count_as.<kind>`). */
export const countAsSchema = z
  .object(
    Object.fromEntries(OUTCOME_KINDS.map((k) => [k, countAsTarget.optional()])) as Record<
      (typeof OUTCOME_KINDS)[number],
      z.ZodOptional<typeof countAsTarget>
    >,
  )
  .strict();

/**
 * Issue 29's policy fields (docs/api.md "Outcome kinds"), flat beside the others; each left out
 * takes its default. Apart from `policyFields` because a policy's own wire form shows them only
 * when set (the circuit's JSON shows every one, resolved).
 */
export const kindFields = {
  count_as: countAsSchema.nullish(),
  min_deadline_ms: int(1, 86_400_000).nullish(), // up to 24 h; null: a caller's deadline never counts
  max_retry_after_seconds: int(1, 86_400).nullish(), // up to 1 day
  throttle_scope: z.enum(['circuit', 'caller']).nullish(),
  ramp: rampSchema.nullish(),
};

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
  /** Absent means null: policies written before issue 17 stay valid. */
  quorum: quorumSchema.nullish(),
  /** Keep this circuit's outcomes in its history (issue 31); absent or null: true. */
  history: z.boolean().nullish(),
};

/** Rules across fields, for a complete policy. */
export function checkPolicy(
  p: { timeout_seconds: number; backoff?: z.infer<typeof backoffSchema> | null },
  ctx: z.RefinementCtx,
): void {
  const max = p.backoff?.max_timeout_seconds;
  if (max != null && max < p.timeout_seconds) {
    ctx.addIssue({
      code: 'custom',
      path: ['backoff', 'max_timeout_seconds'],
      message: `must be at least timeout_seconds (${p.timeout_seconds})`,
    });
  }
}

/** A complete policy in wire form; its output is the domain's `PolicyWire`. */
export const policySchema = z
  .object({ ...policyFields, throttle: policyFields.throttle.optional(), ...kindFields }) // left out: none (a policy written before it existed)
  .strict()
  .superRefine(checkPolicy) satisfies z.ZodType<PolicyWire>;
