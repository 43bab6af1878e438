import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { AppError } from '../domain/errors.js';
import { circuitPermitted } from '../auth/identity.js';
import { identityOf } from '../auth/request-identity.js';
import type { Circuit, CircuitState } from '../domain/circuit.js';
import type { BreakerService, Decision } from '../service/breaker-service.js';
import { refusalError } from '../service/open-error.js';
import { json } from './json.js';
import {
  circuitNameParam,
  circuitNotFound,
  common,
  jsonBody,
  jsonText,
  ok,
  open503,
  parseQuery,
  problem,
  readJson,
  serveRoute,
  withBody,
} from './route-kit.js';
import { AllowedSchema, CircuitSchema, EmptyBody, EventSchema, EventsQuery, ListQuery, NameParam } from './schemas.js';
import { admittedText, circuitJson } from './circuit-json.js';
import { detailWire } from '../domain/transition-detail.js';
import { admissionCaller, CallerQuery, callerQuery } from './caller-param.js';
import { auditRequest, type AuditLog } from '../audit/audit-log.js';
import { changedValues, circuitValues } from '../audit/audit-values.js';

export interface CircuitRouteOptions {
  readonly bodyLimitBytes: number;
  /** Circuits defined by the config (proxy nodes): they cannot be deleted. */
  readonly isConfigCircuit: (name: string) => boolean;
  /** Where reset and delete are recorded (issue 30); absent: not recorded. */
  readonly audit?: AuditLog;
}

/**
 * The circuit as a resource: read, check, list, its events, reset and delete (in the OpenAPI
 * document in this order). Outcomes are in outcome-routes.ts, the policy's PATCH in
 * policy-routes.ts.
 */
export function registerCircuitRoutes(app: OpenAPIHono, breaker: BreakerService, options: CircuitRouteOptions): void {
  registerGet(app, breaker);
  registerReset(app, breaker, options.bodyLimitBytes, options.audit);
  registerAllowed(app, breaker);
  registerList(app, breaker);
  registerEvents(app, breaker);
  registerDelete(app, breaker, options.isConfigCircuit, options.audit);
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
    const caller = admissionCaller(identityOf(c), callerQuery(c));
    const answer = (decision: Decision) => {
      if (decision === null) return jsonText(c, '{"allowed":true,"state":"closed","circuit":null}\n');
      const { circuit, verdict } = decision;
      if (!verdict.allowed) throw refusalError(circuit, verdict, caller);
      const shadowRefuses = breaker.shadowWouldRefuse(circuit, caller); // issue 31; false without a shadow
      return jsonText(c, admittedText(circuit, verdict, breaker.now(), shadowRefuses));
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
    const identity = identityOf(c);
    // One row past the page says whether another page exists: an exactly full last page gets null.
    const rows =
      identity.circuits === null
        ? await breaker.list({ state: query.state, afterId: query.cursor, limit: limit + 1 }, limit)
        : await permittedRows(breaker, query, limit, (name) => circuitPermitted(identity, name));
    const page = rows.slice(0, limit);
    const now = breaker.now();
    const nextCursor = rows.length > limit ? String(page.at(-1)!.id) : null;
    return json(c, { circuits: page.map((circuit) => circuitJson(circuit, now)), next_cursor: nextCursor }, 200);
  });
}

/**
 * A page (and one row past it) of the circuits a credential limited to `circuits` patterns may
 * see: read on in pages until it is full or the circuits end, the others left out.
 */
async function permittedRows(
  breaker: BreakerService,
  query: { state?: CircuitState; cursor?: number },
  limit: number,
  permitted: (name: string) => boolean,
): Promise<Circuit[]> {
  const kept: Circuit[] = [];
  let afterId = query.cursor;
  for (;;) {
    const rows = await breaker.list({ state: query.state, afterId, limit: limit + 1 }, limit + 1);
    kept.push(...rows.filter((row) => permitted(row.name)));
    if (kept.length > limit || rows.length <= limit) return kept.slice(0, limit + 1);
    afterId = rows.at(-1)!.id;
  }
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

/** `POST /circuits/{name}/reset`: close a circuit. */
function registerReset(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number, audit?: AuditLog): void {
  const route = createRoute({
    method: 'post',
    path: '/circuits/{name}/reset',
    tags: ['circuits'],
    summary: 'Close a circuit',
    request: { params: NameParam, body: jsonBody(EmptyBody, false) },
    responses: { 200: ok('The closed circuit', CircuitSchema), ...withBody, 404: problem('Unknown circuit') },
  });
  serveRoute(app, route, async (c) => {
    const name = circuitNameParam(c);
    await readJson(c, EmptyBody, bodyLimitBytes);
    const reset = await breaker.resetCircuit(name, identityOf(c).id);
    if (reset === null) throw circuitNotFound(name);
    const { before, circuit } = reset;
    const change = changedValues(circuitValues(before), circuitValues(circuit));
    await auditRequest(audit, c, { action: 'manual_reset', at: breaker.now(), circuit: name, ...change });
    return json(c, circuitJson(circuit, breaker.now()), 200);
  });
}

/** `DELETE /circuits/{name}`: the circuit and its events; a proxy node's circuit is the config's (409). */
function registerDelete(
  app: OpenAPIHono,
  breaker: BreakerService,
  isConfigCircuit: (name: string) => boolean,
  audit?: AuditLog,
): void {
  const deleteRoute = createRoute({
    method: 'delete',
    path: '/circuits/{name}',
    tags: ['circuits'],
    summary: 'Delete a circuit and its events',
    request: { params: NameParam },
    responses: {
      204: { description: 'Deleted' },
      ...common,
      404: problem('Unknown circuit'),
      409: problem("A proxy node's circuit: defined by the config"),
    },
  });
  app.openAPIRegistry.registerPath(deleteRoute);
  app.delete('/circuits/:name', async (c) => {
    const name = circuitNameParam(c);
    if (isConfigCircuit(name)) {
      throw new AppError(
        'CIRCUIT_DEFINED_BY_CONFIG',
        `Circuit '${name}' belongs to a proxy node and is defined by the config; PATCH it instead.`,
      );
    }
    const deleted = await breaker.deleteCircuit(name);
    if (deleted === null) throw circuitNotFound(name);
    const change = { before: circuitValues(deleted), after: null };
    await auditRequest(audit, c, { action: 'circuit_deleted', at: breaker.now(), circuit: name, ...change });
    return c.body(null, 204);
  });
}
