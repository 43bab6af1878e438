import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { circuitNameProblem } from '../config.js';
import { AppError } from '../domain/errors.js';
import type { BreakerService } from '../service/breaker-service.js';
import {
  CallBody,
  CircuitSchema,
  EventSchema,
  EventsQuery,
  FailureBody,
  ListQuery,
  NameParam,
  OpenProblemSchema,
  OutcomeBody,
  ProblemSchema,
  circuitJson,
} from './schemas.js';

const problem = (description: string, schema: z.ZodTypeAny = ProblemSchema) => ({
  description,
  content: { 'application/problem+json': { schema } },
});
const ok = (description: string, schema: z.ZodTypeAny) => ({ description, content: { 'application/json': { schema } } });
const jsonBody = <T extends z.ZodTypeAny>(schema: T, required: boolean) => ({ required, content: { 'application/json': { schema } } });

const common = {
  400: problem('Invalid circuit name, JSON or query'),
  401: problem('Missing or wrong bearer token (when CIRCUITLOG_TOKEN is set)'),
};
const withBody = { ...common, 413: problem('Body over the size limit'), 422: problem('Body fields failed validation') };
const open503 = problem('Circuit open (or half-open with every probe slot taken); see Retry-After', OpenProblemSchema);

/** The decoded, validated `:name` path parameter. */
function circuitName(raw: string): string {
  const reason = circuitNameProblem(raw);
  if (reason !== null) throw new AppError('INVALID_NAME', `Circuit name ${reason}.`, { extensions: { name: raw.slice(0, 300) } });
  return raw;
}

function notFound(name: string): AppError {
  return new AppError('CIRCUIT_NOT_FOUND', `No circuit named '${name}'.`);
}

/** The /circuits routes: circuitlog-compatible ones first, then the new ones. */
export function registerCircuitRoutes(app: OpenAPIHono, breaker: BreakerService): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/circuits/{name}',
      tags: ['circuits'],
      summary: 'Get a circuit (after the lazy open -> half-open transition)',
      request: { params: NameParam },
      responses: { 200: ok('The circuit', CircuitSchema), ...common, 404: problem('Unknown circuit') },
    }),
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      const circuit = breaker.get(name);
      if (circuit === null) throw notFound(name);
      return c.json(circuitJson(circuit, breaker.now()), 200);
    },
  );

  app.openapi(
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
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      const body = c.req.valid('json');
      const success = body.success ?? true;
      const circuit = breaker.call(name, success, {
        create: body.threshold === undefined ? undefined : { failureThreshold: body.threshold },
        timeoutSeconds: body.timeout_seconds,
      });
      return c.json({ result: success ? ('success' as const) : ('failure' as const), circuit: circuitJson(circuit, breaker.now()) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/circuits/{name}/success',
      tags: ['circuits'],
      summary: 'Record a success (creates the circuit with defaults if missing)',
      request: { params: NameParam },
      responses: { 200: ok('The circuit', CircuitSchema), ...common },
    }),
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      return c.json(circuitJson(breaker.record(name, true), breaker.now()), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/circuits/{name}/failure',
      tags: ['circuits'],
      summary: 'Record a failure (creates the circuit with defaults if missing)',
      request: { params: NameParam, body: jsonBody(FailureBody, false) },
      responses: { 200: ok('The circuit', CircuitSchema), ...withBody },
    }),
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      const body = c.req.valid('json');
      return c.json(circuitJson(breaker.record(name, false, { timeoutSeconds: body.timeout_seconds }), breaker.now()), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/circuits/{name}/reset',
      tags: ['circuits'],
      summary: 'Close a circuit',
      request: { params: NameParam },
      responses: { 200: ok('The closed circuit', CircuitSchema), ...common, 404: problem('Unknown circuit') },
    }),
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      const circuit = breaker.reset(name);
      if (circuit === null) throw notFound(name);
      return c.json(circuitJson(circuit, breaker.now()), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/circuits/{name}/allowed',
      tags: ['circuits'],
      summary: 'May a call go ahead? In half-open an admitted call takes a probe slot',
      request: { params: NameParam },
      responses: {
        200: ok(
          'Allowed; circuit is null for a circuit never recorded (closed by definition)',
          z.object({ allowed: z.literal(true), state: z.enum(['closed', 'half_open']), circuit: CircuitSchema.nullable() }),
        ),
        ...common,
        503: open503,
      },
    }),
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      const admission = breaker.check(name);
      if (admission === null) return c.json({ allowed: true as const, state: 'closed' as const, circuit: null }, 200);
      const { circuit, verdict } = admission;
      if (!verdict.allowed) throw breaker.openError(circuit, verdict.retryAt);
      const state = circuit.state === 'half_open' ? ('half_open' as const) : ('closed' as const);
      return c.json({ allowed: true as const, state, circuit: circuitJson(circuit, breaker.now()) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/circuits/{name}/outcomes',
      tags: ['circuits'],
      summary: 'Record the outcome of a call (creates the circuit with defaults if missing)',
      request: { params: NameParam, body: jsonBody(OutcomeBody, true) },
      responses: { 200: ok('The circuit', CircuitSchema), ...withBody },
    }),
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      const body = c.req.valid('json');
      return c.json(circuitJson(breaker.record(name, body.success), breaker.now()), 200);
    },
  );

  app.openapi(
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
    (c) => {
      const query = c.req.valid('query');
      const limit = query.limit ?? 50;
      const circuits = breaker.list({ state: query.state, afterId: query.cursor, limit });
      const now = breaker.now();
      const last = circuits.at(-1);
      return c.json(
        {
          circuits: circuits.map((circuit) => circuitJson(circuit, now)),
          next_cursor: circuits.length === limit && last ? String(last.id) : null,
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/circuits/{name}/events',
      tags: ['circuits'],
      summary: 'State transitions of a circuit, newest first',
      request: { params: NameParam, query: EventsQuery },
      responses: { 200: ok('Transitions', z.object({ events: z.array(EventSchema) })), ...common, 404: problem('Unknown circuit') },
    }),
    (c) => {
      const name = circuitName(c.req.valid('param').name);
      const events = breaker.events(name, c.req.valid('query').limit ?? 50);
      if (events === null) throw notFound(name);
      return c.json({ events: events.map((e) => ({ from: e.from, to: e.to, reason: e.reason, at: new Date(e.at).toISOString() })) }, 200);
    },
  );
}
