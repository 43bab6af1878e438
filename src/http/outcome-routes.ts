import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { BreakerService } from '../service/breaker-service.js';
import { circuitNameParam, readJson } from './request.js';
import { json } from './json.js';
import { circuitNotFound, jsonBody, jsonText, ok, open503, problem, serveRoute, withBody } from './route-kit.js';
import { CallBody, CircuitSchema, EmptyBody, FailureBody, NameParam, OutcomeBody, outcomeTime } from './schemas.js';
import { circuitJson, circuitText, wouldRefuseJson } from './circuit-json.js';
import { CallerQuery, callerQuery } from './caller-param.js';

/** `POST /circuits/{name}/call`, circuitlog's: refuse with 503 when open, else record the outcome. */
export function registerCall(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  const route = createRoute({
    method: 'post',
    path: '/circuits/{name}/call',
    tags: ['circuits'],
    summary: 'circuitlog call: refuse with 503 when open, else record the outcome',
    request: { params: NameParam, query: CallerQuery, body: jsonBody(CallBody, false) },
    responses: {
      200: ok('Outcome recorded', z.object({ result: z.enum(['success', 'failure']), circuit: CircuitSchema })),
      ...withBody,
      503: open503,
    },
  });
  serveRoute(app, route, async (c) => {
    const name = circuitNameParam(c);
    const caller = callerQuery(c);
    const body = await readJson(c, CallBody, bodyLimitBytes);
    const success = body.success ?? true;
    const { circuit, verdict } = await breaker.callGrouped(name, success, {
      create: body.threshold === undefined ? undefined : { failureThreshold: body.threshold },
      timeoutSeconds: body.timeout_seconds,
      caller,
    });
    // circuitlog's 503 carries the whole circuit as `circuit`.
    if (!verdict.allowed)
      throw breaker.refusal(circuit, verdict, caller, { circuit: circuitJson(circuit, breaker.now()) });
    return json(
      c,
      {
        result: success ? ('success' as const) : ('failure' as const),
        ...wouldRefuseJson(circuit, verdict),
        circuit: circuitJson(circuit, breaker.now()),
      },
      200,
    );
  });
}

/** `POST /circuits/{name}/success` and `/failure`, circuitlog's: record one outcome. */
export function registerSuccessFailure(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
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
    return json(c, circuitJson(await breaker.recordGrouped(name, { success: true }), breaker.now()), 200);
  });
  serveRoute(app, route('failure', FailureBody), async (c) => {
    const name = circuitNameParam(c);
    const body = await readJson(c, FailureBody, bodyLimitBytes);
    const circuit = await breaker.recordGrouped(name, { success: false, timeoutSeconds: body.timeout_seconds });
    return json(c, circuitJson(circuit, breaker.now()), 200);
  });
}

/** `POST /circuits/{name}/reset`: close a circuit. */
export function registerReset(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
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
    const circuit = await breaker.reset(name);
    if (circuit === null) throw circuitNotFound(name);
    return json(c, circuitJson(circuit, breaker.now()), 200);
  });
}

/** `POST /circuits/{name}/outcomes`: the outcome of a call, with its duration and time. */
export function registerOutcome(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
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
    const outcome = { success: body.success, durationMs: body.duration_ms, late: 'count_only' as const, at };
    const circuit = await breaker.recordGrouped(
      name,
      body.caller === undefined ? outcome : { ...outcome, caller: body.caller },
    );
    return jsonText(c, circuitText(circuit, breaker.now()));
  });
}
