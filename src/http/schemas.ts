import { z } from '@hono/zod-openapi';
import type { Circuit } from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';
import { activeLeases, effectiveTimeoutSeconds, windowStats } from '../domain/circuit.js';
import { policyToWire } from '../domain/policy-wire.js';
import { throttleCounts, throttleProbability } from '../domain/throttle.js';
import { backoffSchema, quorumSchema, throttleSchema, windowSchema } from '../policy-schema.js';
import { callerEntries, isolatedCallers } from '../domain/caller-state.js';
import type { Verdict } from '../domain/circuit.js';
import { callerField } from './caller-param.js';

const isoTime = z.string().openapi({ format: 'date-time', example: '2026-11-30T03:30:41.123Z' });

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
    effective_timeout_seconds: z
      .number()
      .int()
      .openapi({ description: 'The open time in force (timeout_seconds unless grown by backoff).' }),
    reopen_count: z.number().int().openapi({ description: 'Re-openings in a row after failed probes; 0 when closed.' }),
    window_stats: z
      .object({
        calls: z.number().int(),
        failures: z.number().int(),
        slow_calls: z.number().int(),
        failure_rate: z.number(),
        slow_call_rate: z.number(),
      })
      .nullable()
      .openapi({ description: 'The window as of now (rates in percent); null without a window.' }),
    probes_in_flight: z.number().int(),
    open_until: isoTime.nullable(),
    half_open_at: isoTime.nullable(),
    last_failure_at: isoTime.nullable(),
    created_at: isoTime,
    updated_at: isoTime,
  })
  .openapi('Circuit');

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** The wire form of a circuit: snake_case, ISO 8601 UTC times with milliseconds. */
export function circuitJson(c: Circuit, now: number): z.infer<typeof CircuitSchema> {
  const stats = windowStats(c, now);
  const counts = c.throttle === null ? null : throttleCounts(c.throttle, c.throttleState, now);
  const policy = policyToWire(c, true);
  return {
    id: c.id,
    name: c.name,
    state: c.state,
    failure_count: c.failureCount,
    ...policy, // failure_threshold to throttle (and quorum when set), in this order
    throttle: policy.throttle ?? null,
    throttle_probability:
      counts === null || c.state !== 'closed' || c.forcedState !== null
        ? 0
        : throttleProbability(c.throttle!.k, counts),
    throttle_window: counts,
    quorum: policy.quorum ?? null,
    isolated_callers: isolatedCallers(callerEntries(c)).map((e) => ({
      caller: e[0],
      failures: e[1],
      open_until: new Date(e[4]!).toISOString(),
      probe_until: iso(e[6]),
    })),
    effective_timeout_seconds: effectiveTimeoutSeconds(c),
    reopen_count: c.reopenCount,
    window_stats:
      stats === null
        ? null
        : {
            calls: stats.calls,
            failures: stats.failures,
            slow_calls: stats.slowCalls,
            failure_rate: stats.failureRate,
            slow_call_rate: stats.slowCallRate,
          },
    probes_in_flight: c.state === 'half_open' ? activeLeases(c, now).length : 0,
    open_until: iso(c.openUntil),
    half_open_at: iso(c.halfOpenAt),
    last_failure_at: iso(c.lastFailureAt),
    created_at: new Date(c.createdAt).toISOString(),
    updated_at: new Date(c.updatedAt).toISOString(),
  };
}

/**
 * Memoise a circuit's serialisation per circuit object. The store hands out the same
 * object until the circuit changes, so a healthy circuit is serialised once, not per
 * request. Half-open circuits are not kept: their `probes_in_flight` depends on `now`.
 * A throttle's counts expire by the epoch second, so a circuit with one is kept for the
 * second it was serialised in (time windows are not kept, as before).
 */
function memoPerCircuit(serialize: (c: Circuit, now: number) => string): (c: Circuit, now: number) => string {
  const memo = new WeakMap<Circuit, string>();
  const perSecond = new WeakMap<Circuit, { second: number; text: string }>();
  return (c, now) => {
    if (c.state === 'half_open' || c.window?.type === 'time') return serialize(c, now);
    if (c.throttle === null) {
      let text = memo.get(c);
      if (text === undefined) memo.set(c, (text = serialize(c, now)));
      return text;
    }
    const second = Math.floor(now / 1000);
    const kept = perSecond.get(c);
    if (kept !== undefined && kept.second === second) return kept.text;
    const text = serialize(c, now);
    perSecond.set(c, { second, text });
    return text;
  };
}

/**
 * Under a forced-closed circuit (detect-only): whether the rules would have refused this
 * call, and how; `{}` on any other circuit.
 */
export function wouldRefuseJson(
  c: Circuit,
  verdict: Verdict,
): { would_refuse?: boolean; would_refuse_scope?: 'circuit' | 'caller'; would_retry_at?: string } {
  if (c.forcedState !== 'closed' || !verdict.allowed) return {};
  const w = verdict.wouldRefuse;
  if (w === undefined) return { would_refuse: false };
  return { would_refuse: true, would_refuse_scope: w.scope, would_retry_at: new Date(w.retryAt).toISOString() };
}

/** The `GET /allowed` answer under a forced-closed circuit (not memoised: it depends on the caller and `now`). */
export function detectOnlyText(c: Circuit, verdict: Verdict, now: number): string {
  return `${JSON.stringify({ allowed: true, state: c.state, ...wouldRefuseJson(c, verdict), circuit: circuitJson(c, now) })}\n`;
}

/** `JSON.stringify(circuitJson(c, now))` and a newline (as every JSON answer), memoised. */
export const circuitText = memoPerCircuit((c, now) => `${JSON.stringify(circuitJson(c, now))}\n`);

/** The `GET /allowed` answer for an admitted call, memoised. */
export const allowedText = memoPerCircuit(
  (c, now) => `{"allowed":true,"state":"${c.state}","circuit":${JSON.stringify(circuitJson(c, now))}}\n`,
);

export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string(),
    code: z.string(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
  })
  .passthrough()
  .openapi('Problem');

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
  scope: z.literal('caller').optional().openapi({
    description: 'Present when only this caller is refused (isolated by failures of its own); open_until is its own.',
  }),
  caller: z.string().optional().openapi({ description: 'With scope caller: the caller refused.' }),
}).openapi('CircuitOpenProblem');

export const NameParam = z.object({
  name: z.string().openapi({
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
      .openapi({ description: 'Outcome of the call (default true). Must be a JSON boolean.' }),
    threshold: threshold
      .optional()
      .openapi({ description: 'Failure threshold, used when this call creates the circuit (default 5).' }),
    timeout_seconds: timeoutSeconds.optional().openapi({
      description:
        "Open time of the opening this failure causes (default: the circuit's timeout_seconds); the policy is unchanged.",
    }),
  })
  .strict()
  .openapi('CallRequest');

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

/** How far into the future an outcome's `at` may lie (another host's clock running ahead). */
export const OUTCOME_AT_MAX_SKEW_MS = 60_000; // 60 s

/** An outcome's `at`: RFC 3339 date-time, as the API's other times. */
export const outcomeAt = z.iso.datetime({ offset: true }).optional().openapi({
  format: 'date-time',
  example: '2026-11-30T03:30:41.123Z',
  description:
    "When the call ended, by the caller's clock (at most 60 s ahead of the server's). An outcome that ended before the circuit's last state change (1 s tolerance) or before its time window changes nothing (a late outcome). Default: now.",
});

/** `at` as epoch ms; null when absent; a VALIDATION_FAILED naming `field` when too far ahead of `now`. */
export function outcomeTime(at: string | undefined, now: number, field: string): number | undefined {
  if (at === undefined) return undefined;
  const ms = Date.parse(at);
  if (ms - now > OUTCOME_AT_MAX_SKEW_MS) {
    throw new AppError('VALIDATION_FAILED', 'The request body has invalid fields.', {
      fields: [
        {
          field,
          message: `is more than ${OUTCOME_AT_MAX_SKEW_MS / 1000} s ahead of the server's clock (${new Date(now).toISOString()})`,
        },
      ],
    });
  }
  return ms;
}

export const OutcomeBody = z
  .object({
    success: z
      .boolean()
      .openapi({ description: 'true for a successful call, false for a failure. Strings are rejected.' }),
    at: outcomeAt,
    duration_ms: z.number().min(0).max(86_400_000).optional().openapi({
      description:
        "How long the call took, in ms; judged against the window's slow_call_duration_ms and observed by circuitlog_outcome_duration_seconds.",
    }),
    caller: callerField,
  })
  .strict()
  .openapi('OutcomeRequest');

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
    .openapi({ type: 'string', description: 'next_cursor from the previous page.' }),
});

/** `GET /allowed`: `circuit` is null for a circuit never recorded (a union, so the document says `null` too). */
export const AllowedSchema = z
  .object({
    allowed: z.literal(true),
    state: z
      .enum(['closed', 'half_open', 'open'])
      .openapi({ description: 'The state by the rules: open only under forced_state closed.' }),
    would_refuse: z.boolean().optional().openapi({
      description: 'Only under forced_state closed (detect-only): true when the rules would have refused this call.',
    }),
    would_refuse_scope: z.enum(['circuit', 'caller']).optional().openapi({
      description: 'With would_refuse true: the circuit refuses everyone, or only this caller (isolated).',
    }),
    would_retry_at: isoTime
      .optional()
      .openapi({ description: 'With would_refuse true: when the rules would let this caller try again.' }),
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
    until: isoTime.optional().openapi({ description: "caller_isolated: when the caller's open time ends." }),
    forced_state: z.literal('closed').optional().openapi({
      description: 'Made while the circuit was forced closed: what the rules would have done (detect-only).',
    }),
  })
  .openapi('Transition');
