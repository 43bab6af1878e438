import { z } from '@hono/zod-openapi';
import { backoffSchema, quorumSchema, throttleSchema, windowSchema } from '../policy-schema.js';
import { kindsPolicyMembers, kindsStateMembers, windowKindsMember } from './kinds-schemas.js';
import { CIRCUIT_NAME_MAX_LENGTH, CIRCUIT_NAME_PATTERN } from '../domain/circuit-name.js';
import { WELL_FORMED_REQUEST_ID } from '../request-id.js';
import { checkKindMembers, kindFields, kindRulesDoc } from './outcome-kind-fields.js';

const isoTime = z.string().openapi({ format: 'date-time', example: '2026-11-30T03:30:41.123Z' });

/** A window's live figures (the circuit's and its shadow's: `windowStatsJson` in circuit-json.ts). */
const windowStats = z
  .object({
    calls: z.number().int(),
    failures: z.number().int(),
    slow_calls: z.number().int(),
    failure_rate: z.number(),
    slow_call_rate: z.number(),
  })
  .nullable()
  .openapi({ description: 'The window as of now (rates in percent); null without a window.' });

export const CircuitSchema = z
  .object({
    id: z.number().int(),
    name: z.string().openapi({ example: 'payment-gateway/charge' }),
    state: z.enum(['closed', 'open', 'half_open']),
    failure_count: z.number().int(),
    failure_threshold: z.number().int(),
    timeout_seconds: z.number().int(),
    half_open_max_calls: z.number().int(),
    success_threshold: z.number().int(),
    window: windowSchema
      .nullable()
      .openapi({ description: 'Sliding window judging failure and slow-call rates; null: none.' }),
    backoff: backoffSchema.nullable().openapi({ description: 'Open-time growth after each failed probe; null: none.' }),
    forced_state: z.enum(['open', 'closed']).nullable(),
    throttle: throttleSchema
      .nullable()
      .openapi({ description: 'Soft throttling while closed ({k, window_seconds}); null: off.' }),
    throttle_probability: z.number().openapi({
      description:
        'The share of calls the throttle refuses now: max(0, (requests - k * accepts) / (requests + 1)) over the window; 0 without a throttle or unless closed.',
    }),
    throttle_window: z.object({ requests: z.number().int(), accepts: z.number().int() }).nullable().openapi({
      description:
        'The counts the probability is drawn from, as of now: requests (outcomes reported while closed, plus calls the throttle refused) and accepts (successes); null without a throttle.',
    }),
    quorum: quorumSchema.nullable().openapi({
      description: 'Open for everyone only when min_callers named callers failed within window_seconds; null: none.',
    }),
    ...kindsPolicyMembers,
    history: z.boolean().openapi({
      description:
        "Whether this circuit's outcomes, manual actions and transitions are kept in its history (issue 31; config history.enabled must be on too).",
    }),
    isolated_callers: z
      .array(
        z.object({
          caller: z.string(),
          failures: z.number().int(),
          open_until: isoTime,
          probe_until: isoTime.nullable(),
        }),
      )
      .openapi({
        description:
          'Named callers isolated by failures of their own (a quorum policy only): each is refused until open_until, then gets one probe.',
      }),
    ...kindsStateMembers,
    effective_timeout_seconds: z
      .number()
      .int()
      .openapi({ description: 'The open time in force (timeout_seconds unless grown by backoff).' }),
    reopen_count: z.number().int().openapi({ description: 'Re-openings in a row after failed probes; 0 when closed.' }),
    window_stats: windowStats,
    window_kinds: windowKindsMember,
    probes_in_flight: z.number().int(),
    open_until: isoTime.nullable(),
    half_open_at: isoTime.nullable(),
    last_failure_at: isoTime.nullable(),
    created_at: isoTime,
    updated_at: isoTime,
    shadow: z
      .object({
        policy: z.record(z.string(), z.unknown()).openapi({
          description: "The shadow's policy, every field resolved as the circuit shows its own (never forced).",
        }),
        state: z.enum(['closed', 'open', 'half_open']).openapi({ description: "The shadow's state as of now." }),
        open_until: isoTime.nullable(),
        since: isoTime.openapi({ description: 'When the shadow was set (its counts start there).' }),
        counts: z.object({
          outcomes: z.number().int().openapi({ description: 'Outcomes fed to the shadow.' }),
          refused: z.number().int().openapi({
            description: 'Outcomes that arrived while the shadow refused calls: it would have refused them (not fed).',
          }),
          openings: z.number().int().openapi({ description: "The shadow's openings." }),
        }),
        window_stats: windowStats,
      })
      .optional()
      .openapi({
        description:
          'Only when the circuit has a shadow policy (PATCH {"shadow": {...}}): a second policy run on the same outcomes without acting on them.',
      }),
  })
  .openapi('Circuit');

export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string(),
    request_id: z.string().regex(WELL_FORMED_REQUEST_ID).openapi({
      description:
        "The request's id, as in the answer's X-Request-Id: the caller's own when well-formed (1 to 255 of A-Z a-z 0-9 _ - =), else a UUID made for it; every log line about the request carries it.",
    }),
    code: z.string(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  })
  .passthrough()
  .openapi('Problem');

export const TooManyCircuitsSchema = ProblemSchema.extend({
  max_circuits: z.number().int().openapi({ description: 'limits.max_circuits' }),
  refused_circuits: z.array(z.string()).openapi({
    description:
      'The new circuit names that do not fit, in order of first appearance; nothing was written, and the same request without their items may be sent again',
  }),
}).openapi('TooManyCircuitsProblem');

export const OpenProblemSchema = ProblemSchema.extend({
  circuit: z
    .union([z.string(), CircuitSchema])
    .openapi({ description: "The name; the whole circuit on circuitlog's POST /call." }),
  state: z
    .enum(['closed', 'open', 'half_open'])
    .openapi({ description: 'open or half_open; any state when forced open.' }),
  open_until: isoTime.nullable(),
  forced_state: z.literal('open').optional(),
  throttle_probability: z
    .number()
    .optional()
    .openapi({ description: 'circuit-throttled only: the refusal probability this call was drawn against.' }),
  scope: z.enum(['caller', 'circuit']).optional().openapi({
    description:
      "caller: only this caller is refused (isolated by failures of its own: open_until is its own; or its own cool-down). dependency-throttled: the cool-down's scope, circuit or caller.",
  }),
  caller: z.string().optional().openapi({ description: 'With scope caller: the caller refused.' }),
  cool_until: isoTime
    .optional()
    .openapi({ description: 'dependency-throttled only: when the cool-down that refused this call ends.' }),
  ramp_percent: z
    .number()
    .optional()
    .openapi({ description: 'circuit-ramping only: the share of calls admitted now, in percent.' }),
  ramp_until: isoTime.optional().openapi({ description: 'circuit-ramping only: when the slow start ends.' }),
}).openapi('CircuitOpenProblem');

/** The circuit name rule (domain/circuit-name.ts) in JSON Schema terms, for the document. */
export const CIRCUIT_NAME_RULE = {
  minLength: 1,
  maxLength: CIRCUIT_NAME_MAX_LENGTH,
  pattern: CIRCUIT_NAME_PATTERN,
} as const;

export const NameParam = z.object({
  name: z.string().openapi({
    ...CIRCUIT_NAME_RULE,
    param: { name: 'name', in: 'path' },
    description:
      "Circuit name: letters, digits and _ . : ~ - in '/'-separated segments; 1-200 characters. In the URL each '/' is sent as %2F (Try it out encodes it).",
    // Unencoded: Swagger UI percent-encodes path parameters itself.
    example: 'payment-gateway/charge',
  }),
});

const threshold = z.number().int().min(1).max(1_000_000_000);
const timeoutSeconds = z
  .number()
  .int()
  .min(1)
  .max(30 * 86_400);

export const CallBody = z
  .object({
    success: z
      .boolean()
      .optional()
      .openapi({ description: 'Outcome of the call (default true, unless kind is given). Must be a JSON boolean.' }),
    ...kindFields,
    threshold: threshold
      .optional()
      .openapi({ description: 'Failure threshold, used when this call creates the circuit (default 5).' }),
    timeout_seconds: timeoutSeconds.optional().openapi({
      description:
        "Open time of the opening this failure causes (default: the circuit's timeout_seconds); the policy is unchanged.",
    }),
  })
  .strict()
  .superRefine((o, ctx) => checkKindMembers(o, ctx, [], false))
  .openapi('CallRequest', kindRulesDoc(false));

export const FailureBody = z
  .object({
    timeout_seconds: timeoutSeconds
      .optional()
      .openapi({ description: 'Open time of the opening this failure causes; the policy is unchanged.' }),
  })
  .strict()
  .openapi('FailureRequest');

/** `/success` and `/reset` take no fields: no body or `{}`. */
export const EmptyBody = z.object({}).strict().openapi('EmptyRequest');

export const ListQuery = z.object({
  state: z.enum(['closed', 'open', 'half_open']).optional(),
  limit: z
    .string()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(1).max(500))
    .optional()
    .openapi({ type: 'integer', minimum: 1, maximum: 500, default: 50, description: 'Page size, 1-500 (default 50).' }),
  cursor: z
    .string()
    .regex(/^\d+$/, 'must be the next_cursor of a previous page')
    .transform(Number)
    .optional()
    .openapi({ type: 'string', pattern: '^\\d+$', description: 'next_cursor from the previous page.' }),
});

/** `GET /allowed`: `circuit` is null for a circuit never recorded (a union, so the document says `null` too). */
export const AllowedSchema = z
  .object({
    allowed: z.literal(true),
    state: z
      .enum(['closed', 'half_open', 'open'])
      .openapi({ description: 'The state by the rules: open only under forced_state closed.' }),
    ramp_percent: z.number().optional().openapi({
      description: 'Only while the circuit ramps up (slow start): the share of calls admitted now, in percent.',
    }),
    would_refuse: z.boolean().optional().openapi({
      description: 'Only under forced_state closed (detect-only): true when the rules would have refused this call.',
    }),
    would_refuse_scope: z.enum(['circuit', 'caller']).optional().openapi({
      description: 'With would_refuse true: the circuit refuses everyone, or only this caller (isolated).',
    }),
    would_retry_at: isoTime
      .optional()
      .openapi({ description: 'With would_refuse true: when the rules would let this caller try again.' }),
    shadow_would_refuse: z.literal(true).optional().openapi({
      description:
        "Only when the circuit's shadow policy would refuse this call (absent otherwise); it is still allowed.",
    }),
    circuit: z.union([CircuitSchema, z.null()]),
  })
  .openapi('Allowed');

export const EventsQuery = z.object({
  limit: ListQuery.shape.limit,
});

export const EventSchema = z
  .object({
    from: z.string(),
    to: z.string(),
    reason: z.string(),
    at: isoTime,
    callers: z.array(z.string()).optional().openapi({
      description:
        "trip_withheld and a quorum's opening: the named callers that failed in the window; caller_isolated / caller_released: the caller.",
    }),
    rule: z.string().optional().openapi({ description: 'trip_withheld: the rule that fired.' }),
    until: isoTime.optional().openapi({
      description: "caller_isolated: when the caller's open time ends; cool_down: when the cool-down ends.",
    }),
    scope: z
      .enum(['circuit', 'caller'])
      .optional()
      .openapi({ description: 'cool_down, cool_down_ended: who cools down (callers names the caller).' }),
    retry_after_seconds: z
      .number()
      .int()
      .optional()
      .openapi({ description: "cool_down: the cool-down's seconds (the dependency's ask, capped)." }),
    ramp_until: isoTime.optional().openapi({
      description:
        'cool_down_ended (circuit scope) and half_open -> closed, when the policy ramps: when the slow start ends.',
    }),
    forced_state: z.literal('closed').optional().openapi({
      description: 'Made while the circuit was forced closed: what the rules would have done (detect-only).',
    }),
    by: z.string().optional().openapi({
      description:
        'forced_open, forced_closed, force_cleared, manual_reset: the credential id that made it (`anonymous` without credentials).',
    }),
    shadow: z.literal(true).optional().openapi({
      description: "A transition of the circuit's shadow policy: the live circuit did not change.",
    }),
  })
  .openapi('Transition');
