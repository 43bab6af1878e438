import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { requireCircuits } from './route-auth.js';
import { circuitNameProblem } from '../config.js';
import { AppError } from '../domain/errors.js';
import type { BreakerService } from '../service/breaker-service.js';
import { refusalError } from '../service/open-error.js';
import { json } from './json.js';
import {
  circuitNameParam,
  jsonBody,
  jsonText,
  ok,
  open503,
  prefersMinimal,
  problem,
  readJson,
  newCircuitQuota,
  serveRoute,
  withBody,
} from './route-kit.js';
import { CIRCUIT_NAME_RULE, CallBody, CircuitSchema, EmptyBody, FailureBody, NameParam } from './schemas.js';
import { circuitJson, circuitText, wouldRefuseJson } from './circuit-json.js';
import { CallerQuery, callerField, callerQuery, reporterOf } from './caller-param.js';
import { identityOf } from '../auth/request-identity.js';
import { checkKindMembers, kindFields, kindOutcome, kindRulesDoc } from './outcome-kind-fields.js';
import { OUTCOME_KINDS } from '../domain/outcome-kind.js';
import { SOURCE_ID } from '../domain/outcome-source.js';

/** How far into the future an outcome's `at` may lie (another host's clock running ahead). */
const OUTCOME_AT_MAX_SKEW_MS = 60_000; // 60 s

/** An outcome's `at`: RFC 3339 date-time, as the API's other times. */
const outcomeAt = z.iso.datetime({ offset: true }).optional().openapi({
  format: 'date-time',
  example: '2026-11-30T03:30:41.123Z',
  description:
    "When the call ended, by the caller's clock (at most 60 s ahead of the server's). An outcome that ended before the circuit's last state change (1 s tolerance) or before its time window changes nothing (a late outcome). Default: now.",
});

/** `at` as epoch ms; null when absent; a VALIDATION_FAILED naming `field` when too far ahead of `now` (the edge agent checks with it too). */
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
    success: z.boolean().optional().openapi({
      description:
        'true for a successful call, false for a failure. Strings are rejected. Required unless kind is given.',
    }),
    ...kindFields,
    at: outcomeAt,
    duration_ms: z.number().min(0).max(86_400_000).optional().openapi({
      description:
        "How long the call took, in ms; judged against the window's slow_call_duration_ms and observed by circuitlog_outcome_duration_seconds.",
    }),
    caller: callerField,
  })
  .strict()
  .superRefine((o, ctx) => checkKindMembers(o, ctx))
  .openapi('OutcomeRequest', kindRulesDoc());

/** Largest batch, and the body limit that fits it with 200-character names (about 260 bytes an item). */
export const MAX_BATCH_OUTCOMES = 1_000;
const BATCH_BODY_LIMIT_BYTES = 1024 * 1024; // 1 MiB
/**
 * Distinct callers one batch may name: a client batches its own outcomes under its one
 * caller id, so a batch naming more is a relay or an attack, and each new caller is an entry in
 * a circuit's caller table (docs/api.md "Callers, quorum and isolation").
 */
export const MAX_BATCH_CALLERS = 100;

const BatchItem = z
  .object({
    circuit: z
      .string()
      .superRefine((name, ctx) => {
        const reason = circuitNameProblem(name);
        if (reason !== null) ctx.addIssue({ code: 'custom', message: `circuit name ${reason}` });
      })
      .openapi(CIRCUIT_NAME_RULE),
    success: z.boolean().optional(),
    ...kindFields,
    duration_ms: z.number().min(0).max(86_400_000).optional(),
    at: outcomeAt,
    caller: callerField,
    seq: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional().openapi({
      description:
        "The outcome's number from the batch's `source`, rising (issue 32): a circuit applies each at most once, so a batch sent again after a lost answer counts once. Ignored in a batch without `source`.",
    }),
  })
  .strict()
  .openapi(kindRulesDoc());
export const BatchBody = z
  .object({
    outcomes: z.array(BatchItem).min(1).max(MAX_BATCH_OUTCOMES),
    source: z.string().regex(SOURCE_ID).optional().openapi({
      description:
        "Who numbered the outcomes' `seq` (a relay such as the edge agent: a random id per process), 8-64 letters, digits and _ . : -. Each circuit remembers the highest `seq` it applied from its 64 most recent sources for 10 minutes (docs/api.md#outcomes-sent-again).",
    }),
  })
  .strict()
  .superRefine(({ outcomes }, ctx) => {
    for (const [i, o] of outcomes.entries()) checkKindMembers(o, ctx, ['outcomes', i]);
    const callers = new Set<string>();
    for (const [i, o] of outcomes.entries()) {
      if (o.caller === undefined || callers.has(o.caller)) continue;
      if (callers.size === MAX_BATCH_CALLERS) {
        ctx.addIssue({
          code: 'custom',
          path: ['outcomes', i, 'caller'],
          message: `is a caller past the ${MAX_BATCH_CALLERS} distinct callers one batch may name`,
        });
        return;
      }
      callers.add(o.caller);
    }
  })
  .openapi('OutcomeBatch');
const BatchAnswer = z.object({
  results: z.array(z.object({ circuit: z.string(), state: z.enum(['closed', 'open', 'half_open']) })),
});

/** The HTTP routes' rule for every outcome (see `RecordRules`). */
const GROUPED = { grouped: true } as const;

/**
 * The outcome routes: circuitlog's `call`, `success` and `failure`, the outcome of a call with
 * its duration and time, and the batch. Each records through `breaker.record` (or
 * `recordBatch`) with the HTTP routes' rule: `grouped` (the circuit limit, then the group
 * commit; the answer waits for its commit).
 */
export function registerOutcomeRoutes(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  registerCall(app, breaker, bodyLimitBytes);
  registerSuccessFailure(app, breaker, bodyLimitBytes);
  registerOutcome(app, breaker, bodyLimitBytes);
  registerBatch(app, breaker, bodyLimitBytes);
}

/** `POST /circuits/{name}/call`, circuitlog's: refuse with 503 when open, else record the outcome. */
function registerCall(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  const route = createRoute({
    method: 'post',
    path: '/circuits/{name}/call',
    tags: ['circuits'],
    summary: 'circuitlog call: refuse with 503 when open, else record the outcome',
    request: { params: NameParam, query: CallerQuery, body: jsonBody(CallBody, false) },
    responses: {
      200: ok(
        'Outcome recorded',
        z.object({
          result: z
            .enum(OUTCOME_KINDS)
            .openapi({ description: 'The kind recorded: success or failure by success, or the kind given.' }),
          circuit: CircuitSchema,
        }),
      ),
      ...withBody,
      503: open503,
    },
  });
  serveRoute(app, route, async (c) => {
    const name = circuitNameParam(c);
    const reporter = reporterOf(identityOf(c), callerQuery(c));
    const caller = reporter.caller;
    const body = await readJson(c, CallBody, bodyLimitBytes);
    const kinded = kindOutcome(body, true);
    const create = body.threshold === undefined ? undefined : { failureThreshold: body.threshold };
    await newCircuitQuota(c, breaker, [name]);
    const { circuit, verdict } = await breaker.record(
      name,
      { ...kinded, timeoutSeconds: body.timeout_seconds, ...reporter },
      { create, admit: true, grouped: true },
    );
    // circuitlog's 503 carries the whole circuit as `circuit`.
    if (!verdict.allowed)
      throw refusalError(circuit, verdict, caller, { circuit: circuitJson(circuit, breaker.now()) });
    return json(
      c,
      {
        result: kinded.kind ?? (kinded.success ? ('success' as const) : ('failure' as const)),
        ...wouldRefuseJson(circuit, verdict),
        circuit: circuitJson(circuit, breaker.now()),
      },
      200,
    );
  });
}

/** `POST /circuits/{name}/success` and `/failure`, circuitlog's: record one outcome. */
function registerSuccessFailure(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  const route = (outcome: 'success' | 'failure', body: typeof EmptyBody | typeof FailureBody) =>
    createRoute({
      method: 'post',
      path: `/circuits/{name}/${outcome}`,
      tags: ['circuits'],
      summary: `Record a ${outcome} (creates the circuit with defaults if missing)`,
      request: { params: NameParam, body: jsonBody(body, false) },
      responses: { 200: ok('The circuit', CircuitSchema), ...withBody },
    });
  serveRoute(app, route('success', EmptyBody), async (c) => {
    const name = circuitNameParam(c);
    await readJson(c, EmptyBody, bodyLimitBytes);
    const reporter = reporterOf(identityOf(c), undefined);
    await newCircuitQuota(c, breaker, [name]);
    const { circuit } = await breaker.record(name, { success: true, ...reporter }, GROUPED);
    return json(c, circuitJson(circuit, breaker.now()), 200);
  });
  serveRoute(app, route('failure', FailureBody), async (c) => {
    const name = circuitNameParam(c);
    const body = await readJson(c, FailureBody, bodyLimitBytes);
    const outcome = { success: false, timeoutSeconds: body.timeout_seconds, ...reporterOf(identityOf(c), undefined) };
    await newCircuitQuota(c, breaker, [name]);
    const { circuit } = await breaker.record(name, outcome, GROUPED);
    return json(c, circuitJson(circuit, breaker.now()), 200);
  });
}

/** `POST /circuits/{name}/outcomes`: the outcome of a call, with its duration and time. */
function registerOutcome(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  const route = createRoute({
    method: 'post',
    path: '/circuits/{name}/outcomes',
    tags: ['circuits'],
    summary: 'Record the outcome of a call (creates the circuit with defaults if missing)',
    request: { params: NameParam, body: jsonBody(OutcomeBody, true) },
    responses: { 200: ok('The circuit', CircuitSchema), ...withBody },
  });
  serveRoute(app, route, async (c) => {
    const name = circuitNameParam(c);
    const body = await readJson(c, OutcomeBody, bodyLimitBytes);
    // A late outcome (the circuit opened since the call was admitted) changes no state.
    const at = outcomeTime(body.at, breaker.now(), 'at');
    const reporter = reporterOf(identityOf(c), body.caller);
    const outcome = { ...kindOutcome(body), durationMs: body.duration_ms, late: 'count_only' as const, at };
    const quota = newCircuitQuota(c, breaker, [name]);
    if (quota !== undefined) await quota; // no microtask for a credential without a bound: the intake path
    const { circuit } = await breaker.record(name, { ...outcome, ...reporter }, GROUPED);
    return jsonText(c, circuitText(circuit, breaker.now()));
  });
}

/** `POST /outcomes`: up to MAX_BATCH_OUTCOMES outcomes in order, in one transaction. */
function registerBatch(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  const batchRoute = createRoute({
    method: 'post',
    path: '/outcomes',
    tags: ['circuits'],
    summary: `Record 1-${MAX_BATCH_OUTCOMES} outcomes in order, in one transaction (creating circuits with the defaults)`,
    request: {
      headers: z.object({
        prefer: z.string().optional().openapi({
          description: 'return=minimal (RFC 7240): answer 204 with no body (Preference-Applied: return=minimal)',
          example: 'return=minimal',
        }),
      }),
      body: { required: true, content: { 'application/json': { schema: BatchBody } } },
    },
    responses: {
      200: ok("Each item's circuit and its state after it, in order", BatchAnswer),
      204: { description: 'Recorded, with Prefer: return=minimal (Preference-Applied: return=minimal)' },
      ...withBody,
      413: problem('Body over 1 MiB (or api_body_limit_bytes, the larger)'),
      422: problem(
        `An invalid item (errors name it as outcomes.<index>.<field>), or more than ${MAX_BATCH_CALLERS} distinct callers; nothing was recorded`,
      ),
    },
  });
  app.openAPIRegistry.registerPath(batchRoute);
  app.post('/outcomes', async (c) => {
    const body = await readJson(c, BatchBody, Math.max(bodyLimitBytes, BATCH_BODY_LIMIT_BYTES));
    const names = body.outcomes.map((o) => o.circuit);
    requireCircuits(c, names);
    const quota = newCircuitQuota(c, breaker, names);
    if (quota !== undefined) await quota;
    const now = breaker.now();
    const identity = identityOf(c);
    // Every item is checked (its caller too: 403 caller-not-permitted) before any is recorded.
    const circuits = await breaker.recordBatch(
      body.outcomes.map((o, i) => ({
        name: o.circuit,
        ...kindOutcome(o),
        durationMs: o.duration_ms,
        late: 'count_only' as const,
        at: outcomeTime(o.at, now, `outcomes.${i}.at`),
        ...reporterOf(identity, o.caller),
        seq: o.seq,
      })),
      body.source,
    );
    if (prefersMinimal(c)) return c.body(null, 204, { 'preference-applied': 'return=minimal' });
    return json(c, { results: circuits.map((circuit) => ({ circuit: circuit.name, state: circuit.state })) }, 200);
  });
}
