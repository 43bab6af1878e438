/**
 * Issue 29's members of a circuit's JSON, for the OpenAPI document (`CircuitSchema` spreads
 * them): the five kind settings as in force, the cool-downs and the ramp now, and the window's
 * outcomes by kind (docs/api.md "Outcome kinds").
 */
import { z } from '@hono/zod-openapi';
import { countAsSchema, rampSchema } from '../policy-schema.js';

const isoTime = z.string().openapi({ format: 'date-time', example: '2026-11-30T03:30:41.123Z' });

/** The five settings, resolved (`kindsDisplay`). */
export const kindsPolicyMembers = {
  count_as: z.object(countAsSchema.shape).strict().openapi({
    description:
      'Overrides of what an outcome kind counts as (success, failure or ignore); {}: the defaults (docs/api.md "Outcome kinds").',
  }),
  min_deadline_ms: z.number().int().nullable().openapi({
    description:
      'A caller_deadline outcome whose deadline_ms is at least this counts as a failure; null: never (default 1000).',
  }),
  max_retry_after_seconds: z
    .number()
    .int()
    .openapi({ description: 'The longest cool-down a throttled outcome may ask for (default 300).' }),
  throttle_scope: z.enum(['circuit', 'caller']).openapi({
    description:
      "Who cools down after a throttled outcome, as in force: the policy's, else caller with a quorum and circuit without.",
  }),
  ramp: rampSchema.nullable().openapi({
    description:
      'The shared slow start after closing from half-open or a circuit-wide cool-down ({seconds, start_percent}); null: off.',
  }),
};

/** The cool-downs and the ramp as of now. */
export const kindsStateMembers = {
  cool_until: isoTime.nullable().openapi({
    description: 'The circuit-wide cool-down (a throttled outcome, throttle_scope circuit) ends then; null: none.',
  }),
  cooling_callers: z.array(z.object({ caller: z.string(), cool_until: isoTime })).openapi({
    description: 'The caller-scope cool-downs in force (throttle_scope caller); [] when none.',
  }),
  ramp_until: isoTime.nullable().openapi({ description: 'The slow start ends then; null when not ramping.' }),
  ramp_percent: z.number().openapi({
    description: 'The share of calls admitted now, in percent (2 decimals); 100 when not ramping.',
  }),
};

/** `window_kinds`. */
export const windowKindsMember = z
  .object({
    success: z.number().int(),
    failure: z.number().int(),
    rejected: z.number().int(),
    throttled: z.number().int(),
    caller_deadline: z.number().int(),
    cancelled: z.number().int(),
  })
  .nullable()
  .openapi({
    description:
      "The window's outcomes by kind (issue 29), those the rules count as nothing included: a count window's last size outcomes, a time window's seconds; null without a window.",
  });
