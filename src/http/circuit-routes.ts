import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { BreakerService, Decision } from '../service/breaker-service.js';
import { json } from './json.js';
import { registerCall, registerOutcome, registerReset, registerSuccessFailure } from './outcome-routes.js';
import { circuitNameParam, parseQuery } from './request.js';
import { circuitNotFound, common, jsonText, ok, open503, problem, serveRoute } from './route-kit.js';
import { AllowedSchema, CircuitSchema, EventSchema, EventsQuery, ListQuery, NameParam } from './schemas.js';
import { allowedText, circuitJson, detectOnlyText } from './circuit-json.js';
import { detailWire } from '../domain/transition-detail.js';
import { CallerQuery, callerQuery } from './caller-param.js';

/**
 * The /circuits routes: circuitlog-compatible ones first, then the new ones (this order is
 * the OpenAPI document's). Writes are in outcome-routes.ts; PATCH and DELETE in policy-routes.ts.
 */
export function registerCircuitRoutes(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  registerGet(app, breaker);
  registerCall(app, breaker, bodyLimitBytes);
  registerSuccessFailure(app, breaker, bodyLimitBytes);
  registerReset(app, breaker, bodyLimitBytes);
  registerAllowed(app, breaker);
  registerOutcome(app, breaker, bodyLimitBytes);
  registerList(app, breaker);
  registerEvents(app, breaker);
}

/** `GET /circuits/{name}`. */
function registerGet(app: OpenAPIHono, breaker: BreakerService): void {
  const route = createRoute({
    method: 'get',
    path: '/circuits/{name}',
    tags: ['circuits'],
    summary: 'Get a circuit (after the lazy open -> half-open transition)',
    request: { params: NameParam },
    responses: { 200: ok('The circuit', CircuitSchema), ...common, 404: problem('Unknown circuit') },
  });
  serveRoute(app, route, async (c) => {
    const name = circuitNameParam(c);
    const circuit = await breaker.get(name);
    if (circuit === null) throw circuitNotFound(name);
    return json(c, circuitJson(circuit, breaker.now()), 200);
  });
}

/** `GET /circuits/{name}/allowed`: the fast path, synchronous while the circuit is closed. */
function registerAllowed(app: OpenAPIHono, breaker: BreakerService): void {
  const route = createRoute({
    method: 'get',
    path: '/circuits/{name}/allowed',
    tags: ['circuits'],
    summary: 'May a call go ahead? In half-open an admitted call takes a probe slot',
    request: { params: NameParam, query: CallerQuery },
    responses: {
      200: ok('Allowed; circuit is null for a circuit never recorded (closed by definition)', AllowedSchema),
      ...common,
      503: open503,
    },
  });
  serveRoute(app, route, (c) => {
    const name = circuitNameParam(c);
    const caller = callerQuery(c);
    const answer = (decision: Decision) => {
      if (decision === null) return jsonText(c, '{"allowed":true,"state":"closed","circuit":null}\n');
      const { circuit, verdict } = decision;
      if (!verdict.allowed) throw breaker.refusal(circuit, verdict, caller);
      if (circuit.forcedState === 'closed') return jsonText(c, detectOnlyText(circuit, verdict, breaker.now()));
      return jsonText(c, allowedText(circuit, breaker.now()));
    };
    // Synchronous when the store answers from memory (a closed circuit): no microtask on the hot path.
    const peeked = breaker.peekAllowed(name, caller);
    return peeked === undefined ? breaker.allowed(name, caller).then(answer) : answer(peeked);
  });
}

/** `GET /circuits`: a page of circuits, optionally by state. */
function registerList(app: OpenAPIHono, breaker: BreakerService): void {
  const route = createRoute({
    method: 'get',
    path: '/circuits',
    tags: ['circuits'],
    summary: 'List circuits, optionally by state, in pages',
    request: { query: ListQuery },
    responses: {
      200: ok('A page of circuits', z.object({ circuits: z.array(CircuitSchema), next_cursor: z.string().nullable() })),
      ...common,
    },
  });
  serveRoute(app, route, async (c) => {
    const query = parseQuery(c, ListQuery);
    const limit = query.limit ?? 50;
    // One row past the page says whether another page exists: an exactly full last page gets null.
    const rows = await breaker.list({ state: query.state, afterId: query.cursor, limit: limit + 1 }, limit);
    const page = rows.slice(0, limit);
    const now = breaker.now();
    const nextCursor = rows.length > limit ? String(page.at(-1)!.id) : null;
    return json(c, { circuits: page.map((circuit) => circuitJson(circuit, now)), next_cursor: nextCursor }, 200);
  });
}

/** `GET /circuits/{name}/events`: its transitions, newest first. */
function registerEvents(app: OpenAPIHono, breaker: BreakerService): void {
  const route = createRoute({
    method: 'get',
    path: '/circuits/{name}/events',
    tags: ['circuits'],
    summary: 'State transitions of a circuit, newest first',
    request: { params: NameParam, query: EventsQuery },
    responses: {
      200: ok('Transitions', z.object({ events: z.array(EventSchema) })),
      ...common,
      404: problem('Unknown circuit'),
    },
  });
  serveRoute(app, route, async (c) => {
    const name = circuitNameParam(c);
    const events = await breaker.events(name, parseQuery(c, EventsQuery).limit ?? 50);
    if (events === null) throw circuitNotFound(name);
    return json(
      c,
      {
        events: events.map((e) => ({
          from: e.from,
          to: e.to,
          reason: e.reason,
          at: new Date(e.at).toISOString(),
          ...detailWire(e),
        })),
      },
      200,
    );
  });
}
