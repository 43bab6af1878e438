import { createRoute, z, type OpenAPIHono, type RouteConfig } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { AppError } from '../domain/errors.js';
import type { BreakerService } from '../service/breaker-service.js';
import { circuitNameParam, parseQuery, readJson } from './request.js';
import { chain } from '../store/maybe-promise.js';
import { json } from './json.js';
import {
  AllowedSchema,
  CallBody,
  CircuitSchema,
  EmptyBody,
  EventSchema,
  EventsQuery,
  FailureBody,
  ListQuery,
  NameParam,
  OpenProblemSchema,
  OutcomeBody,
  ProblemSchema,
  circuitJson,
  circuitText,
  allowedText,
  outcomeTime,
} from './schemas.js';

const retryAfter = { 'Retry-After': { description: 'Whole seconds to wait, at least 1', schema: { type: 'integer' as const, minimum: 1 } } };
export const problem = (description: string, schema: z.ZodTypeAny = ProblemSchema, headers?: typeof retryAfter) => ({
  description,
  content: { 'application/problem+json': { schema } },
  ...(headers && { headers }),
});
export const ok = (description: string, schema: z.ZodTypeAny) => ({ description, content: { 'application/json': { schema } } });
const jsonBody = <T extends z.ZodTypeAny>(schema: T, required: boolean) => ({ required, content: { 'application/json': { schema } } });

export const common = {
  400: problem('Invalid circuit name, JSON or query'),
  401: problem('Missing or wrong bearer token (when CIRCUITLOG_TOKEN is set)'),
  405: problem('Another method than the ones this path answers; Allow lists them'),
  503: problem(
    'storage-busy (the database stayed locked past the busy timeout), or on a write storage-full or storage-unavailable',
    ProblemSchema,
    retryAfter,
  ),
};
/** A body is optional and ignored, but if sent it must be JSON (415) and within the limit (413). */
const anyBody = { ...common, 413: problem('Body over the size limit'), 415: problem('A body that is not application/json') };
const tooManyCircuits = { 507: problem('A new circuit name past limits.max_circuits (too-many-circuits); nothing was written') };
export const withBody = { ...anyBody, 422: problem('Body fields failed validation'), ...tooManyCircuits };
const open503 = problem(
  'circuit-open: the circuit is open, or half-open with every probe slot taken; circuit-forced-open: forced open by an operator; circuit-throttled: closed, but its soft throttle refused this call (Retry-After: 1, throttle_probability); or a storage problem (storage-busy, storage-unavailable, ...)',
  z.union([OpenProblemSchema, ProblemSchema]),
  retryAfter,
);

type Handler = (c: Context) => Response | Promise<Response>;

/** A 200 answer with an already-serialised JSON body (ending in a newline, as every JSON answer). */
function jsonText(c: Context, text: string): Response {
  return c.body(text, 200, { 'content-type': 'application/json' });
}

/**
 * Document `route` in the OpenAPI registry and serve it with a plain Hono handler. The
 * handler validates with the same zod schemas, synchronously: zod-openapi's async
 * validator chain costs more than the breaker step itself on the hot routes.
 */
function serveRoute(app: OpenAPIHono, route: RouteConfig, handler: Handler): void {
  app.openAPIRegistry.registerPath(route);
  app.on(route.method.toUpperCase(), route.path.replace(/\{(\w+)\}/g, ':$1'), handler);
}

function notFound(name: string): AppError {
  return new AppError('CIRCUIT_NOT_FOUND', `No circuit named '${name}'.`);
}

/** The /circuits routes: circuitlog-compatible ones first, then the new ones. */
export function registerCircuitRoutes(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  serveRoute(
    app,
    createRoute({
      method: 'get',
      path: '/circuits/{name}',
      tags: ['circuits'],
      summary: 'Get a circuit (after the lazy open -> half-open transition)',
      request: { params: NameParam },
      responses: { 200: ok('The circuit', CircuitSchema), ...common, 404: problem('Unknown circuit') },
    }),
    async (c) => {
      const name = circuitNameParam(c);
      const circuit = await breaker.get(name);
      if (circuit === null) throw notFound(name);
      return json(c, circuitJson(circuit, breaker.now()), 200);
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'post',
      path: '/circuits/{name}/call',
      tags: ['circuits'],
      summary: 'circuitlog call: refuse with 503 when open, else record the outcome',
      request: { params: NameParam, body: jsonBody(CallBody, false) },
      responses: {
        200: ok('Outcome recorded', z.object({ result: z.enum(['success', 'failure']), circuit: CircuitSchema })),
        ...withBody,
        503: open503,
      },
    }),
    async (c) => {
      const name = circuitNameParam(c);
      const body = await readJson(c, CallBody, bodyLimitBytes);
      const success = body.success ?? true;
      const { circuit, verdict } = await breaker.callGrouped(name, success, {
        create: body.threshold === undefined ? undefined : { failureThreshold: body.threshold },
        timeoutSeconds: body.timeout_seconds,
      });
      // circuitlog's 503 carries the whole circuit as `circuit`.
      if (!verdict.allowed) {
        throw breaker.openError(circuit, verdict.retryAt, { forced: verdict.forced, throttled: verdict.throttled, circuit: circuitJson(circuit, breaker.now()) });
      }
      return json(c, { result: success ? ('success' as const) : ('failure' as const), circuit: circuitJson(circuit, breaker.now()) }, 200);
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'post',
      path: '/circuits/{name}/success',
      tags: ['circuits'],
      summary: 'Record a success (creates the circuit with defaults if missing)',
      request: { params: NameParam, body: jsonBody(EmptyBody, false) },
      responses: { 200: ok('The circuit', CircuitSchema), ...withBody },
    }),
    async (c) => {
      const name = circuitNameParam(c);
      await readJson(c, EmptyBody, bodyLimitBytes);
      return json(c, circuitJson(await breaker.recordGrouped(name, { success: true }), breaker.now()), 200);
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'post',
      path: '/circuits/{name}/failure',
      tags: ['circuits'],
      summary: 'Record a failure (creates the circuit with defaults if missing)',
      request: { params: NameParam, body: jsonBody(FailureBody, false) },
      responses: { 200: ok('The circuit', CircuitSchema), ...withBody },
    }),
    async (c) => {
      const name = circuitNameParam(c);
      const body = await readJson(c, FailureBody, bodyLimitBytes);
      const circuit = await breaker.recordGrouped(name, { success: false, timeoutSeconds: body.timeout_seconds });
      return json(c, circuitJson(circuit, breaker.now()), 200);
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'post',
      path: '/circuits/{name}/reset',
      tags: ['circuits'],
      summary: 'Close a circuit',
      request: { params: NameParam, body: jsonBody(EmptyBody, false) },
      responses: { 200: ok('The closed circuit', CircuitSchema), ...withBody, 404: problem('Unknown circuit') },
    }),
    async (c) => {
      const name = circuitNameParam(c);
      await readJson(c, EmptyBody, bodyLimitBytes);
      const circuit = await breaker.reset(name);
      if (circuit === null) throw notFound(name);
      return json(c, circuitJson(circuit, breaker.now()), 200);
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'get',
      path: '/circuits/{name}/allowed',
      tags: ['circuits'],
      summary: 'May a call go ahead? In half-open an admitted call takes a probe slot',
      request: { params: NameParam },
      responses: {
        200: ok('Allowed; circuit is null for a circuit never recorded (closed by definition)', AllowedSchema),
        ...common,
        503: open503,
      },
    }),
    (c) => {
      const name = circuitNameParam(c);
      // Synchronous when the store answers from memory (a closed circuit): no microtask on the hot path.
      return chain(breaker.check(name), (admission) => {
        if (admission === null) return jsonText(c, '{"allowed":true,"state":"closed","circuit":null}\n');
        const { circuit, verdict } = admission;
        if (!verdict.allowed) throw breaker.openError(circuit, verdict.retryAt, { forced: verdict.forced, throttled: verdict.throttled });
        return jsonText(c, allowedText(circuit, breaker.now()));
      });
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'post',
      path: '/circuits/{name}/outcomes',
      tags: ['circuits'],
      summary: 'Record the outcome of a call (creates the circuit with defaults if missing)',
      request: { params: NameParam, body: jsonBody(OutcomeBody, true) },
      responses: { 200: ok('The circuit', CircuitSchema), ...withBody },
    }),
    async (c) => {
      const name = circuitNameParam(c);
      const body = await readJson(c, OutcomeBody, bodyLimitBytes);
      // A late outcome (the circuit opened since the call was admitted) changes no state.
      const at = outcomeTime(body.at, breaker.now(), 'at');
      const circuit = await breaker.recordGrouped(name, { success: body.success, durationMs: body.duration_ms, late: 'count_only', at });
      return jsonText(c, circuitText(circuit, breaker.now()));
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'get',
      path: '/circuits',
      tags: ['circuits'],
      summary: 'List circuits, optionally by state, in pages',
      request: { query: ListQuery },
      responses: {
        200: ok('A page of circuits', z.object({ circuits: z.array(CircuitSchema), next_cursor: z.string().nullable() })),
        ...common,
      },
    }),
    async (c) => {
      const query = parseQuery(c, ListQuery);
      const limit = query.limit ?? 50;
      // One row past the page says whether another page exists: an exactly full last page gets null.
      const rows = await breaker.list({ state: query.state, afterId: query.cursor, limit: limit + 1 }, limit);
      const page = rows.slice(0, limit);
      const now = breaker.now();
      return json(c,
        {
          circuits: page.map((circuit) => circuitJson(circuit, now)),
          next_cursor: rows.length > limit ? String(page.at(-1)!.id) : null,
        },
        200,
      );
    },
  );

  serveRoute(
    app,
    createRoute({
      method: 'get',
      path: '/circuits/{name}/events',
      tags: ['circuits'],
      summary: 'State transitions of a circuit, newest first',
      request: { params: NameParam, query: EventsQuery },
      responses: { 200: ok('Transitions', z.object({ events: z.array(EventSchema) })), ...common, 404: problem('Unknown circuit') },
    }),
    async (c) => {
      const name = circuitNameParam(c);
      const events = await breaker.events(name, parseQuery(c, EventsQuery).limit ?? 50);
      if (events === null) throw notFound(name);
      return json(c, { events: events.map((e) => ({ from: e.from, to: e.to, reason: e.reason, at: new Date(e.at).toISOString() })) }, 200);
    },
  );
}
