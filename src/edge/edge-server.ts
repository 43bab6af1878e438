/**
 * The edge agent's HTTP face (issue 32; docs/gateways.md): the server's hot routes answered by
 * the agent (`GET /circuits/:name/allowed`, `POST /circuits/:name/outcomes`, `POST /outcomes`,
 * `POST /circuits/:name/call`), the gateways' check route (`/gate`), its own health and
 * stats, and every other request passed to the server as is (streamed both ways).
 * Plain node:http: the hot route must cost less than the server's own.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';
import { callerProblem } from '../domain/caller.js';
import { circuitNameProblem } from '../domain/circuit-name.js';
import { AppError } from '../domain/errors.js';
import type { OutcomeItem } from '../client/transport.js';
import { BatchBody, OutcomeBody, outcomeTime } from '../http/outcome-routes.js';
import { crossSiteProblem, misdirected, type HostRule } from '../http/request-guard.js';
import { bodyOf } from '../http/route-kit.js';
import { CallBody } from '../http/schemas.js';
import { REQUEST_ID_HEADER, WELL_FORMED_REQUEST_ID, newRequestId } from '../request-id.js';
import { HOP_BY_HOP, ServerUnreachable, type EdgeAgent } from './agent.js';
import type { EdgeAnswer, EdgeLogger } from './edge-types.js';
import type { GateRequest } from './gate-circuit.js';

export interface EdgeServerDeps {
  readonly agent: EdgeAgent;
  readonly logger: EdgeLogger & { error(fields: Record<string, unknown>, message?: string): void };
  /** The gateways' check route (src/edge/gate.ts); absent: `/gate` is passed to the server like any route. */
  readonly gate?: (request: GateRequest) => Promise<EdgeAnswer>;
  /** Largest body of one outcome or call (the server's `api_body_limit_bytes` default). */
  readonly bodyLimitBytes?: number;
  /** Extra counters for `/edge/stats` (the syslog intake's). */
  readonly extraStats?: () => Record<string, unknown>;
  /** Which `Host` values it answers (`hostRule` of the listen address and `edge.allowed_hosts`); null: any. */
  readonly hostRule?: HostRule;
}

const PREFIX = '/circuits/';
const SUFFIX = '/allowed';
const ALLOWED = /^\/circuits\/([^/?#]+)\/allowed(?:\?(.*))?$/;
const OUTCOMES = /^\/circuits\/([^/?#]+)\/outcomes(?:\?.*)?$/;
const CALL = /^\/circuits\/([^/?#]+)\/call(?:\?(.*))?$/;
/** The POST routes the agent answers itself (the path, without the query). */
const HOT_POST = /^\/(?:outcomes|circuits\/[^/?#]+\/(?:outcomes|call))$/;
const BATCH_LIMIT_BYTES = 1024 * 1024; // the server's batch limit
const JSON_HEADERS = { 'content-type': 'application/json' } as const;

/** The request listener (`http.createServer(edgeListener(deps))`). */
export function edgeListener(deps: EdgeServerDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const { agent } = deps;
  const limit = deps.bodyLimitBytes ?? 16 * 1024;
  const hostRule = deps.hostRule ?? null;
  return (req, res) => {
    const target = req.url ?? '/';
    const requestId = incomingId(req);
    // DNS rebinding: a page whose name now points at loopback must not report through the agent's
    // token. /gate answers any Host (nginx sends its upstream block's name).
    const wrongHost = hostRule === null ? null : misdirected(hostRule, req.headers.host, 'edge.allowed_hosts');
    if (wrongHost !== null && !target.startsWith('/gate')) {
      req.resume();
      send(res, agent.problem(wrongHost, target, requestId));
      return;
    }
    // The hot path, synchronous: a plain closed circuit the view trusts, named plainly (no %, no query).
    if (req.method === 'GET' && target.endsWith(SUFFIX) && target.startsWith(PREFIX)) {
      const name = target.slice(PREFIX.length, -SUFFIX.length);
      if (!/[/?%#]/.test(name)) {
        const local = agent.localBody(name);
        if (local !== null) {
          res.writeHead(200, [
            'content-type',
            'application/json',
            REQUEST_ID_HEADER,
            requestId ?? newRequestId(),
            'content-length',
            local.length,
          ]);
          res.end(local.bytes);
          return;
        }
      }
    }
    route(deps, limit, req, res, target, requestId).catch((error: unknown) => {
      if (error instanceof AppError) {
        send(res, agent.problem(error, target, requestId));
        return;
      }
      if (error instanceof ServerUnreachable) {
        const e = new AppError('CIRCUITLOG_UNAVAILABLE', 'circuitlog is unreachable from the edge agent.', {
          retryAfterSeconds: 1,
        });
        send(res, agent.problem(e, target, requestId));
        return;
      }
      deps.logger.error({ event: 'edge_error', target, error: String(error) }, 'edge agent request failed');
      if (!res.headersSent)
        send(res, agent.problem(new AppError('INTERNAL', 'The edge agent failed.'), target, requestId));
      else res.destroy();
    });
  };
}

async function route(
  deps: EdgeServerDeps,
  limit: number,
  req: IncomingMessage,
  res: ServerResponse,
  target: string,
  requestId: string | undefined,
): Promise<void> {
  const { agent } = deps;
  const method = req.method ?? 'GET';
  const path = target.split('?', 1)[0]!;
  if (method === 'GET' && path === '/health/live') return send(res, jsonAnswer(200, { status: 'ok' }));
  if (method === 'GET' && path === '/health/ready') {
    if (agent.ready) return send(res, jsonAnswer(200, { status: 'ready', following: true }));
    const e = new AppError('NOT_READY', 'The edge agent is not following circuitlog’s event stream.', {
      retryAfterSeconds: 1,
      extensions: { connection: agent.stats().connection },
    });
    return send(res, agent.problem(e, target, requestId));
  }
  if (method === 'GET' && path === '/edge/stats')
    return send(res, jsonAnswer(200, { ...agent.stats(), ...(deps.extraStats?.() ?? {}) }));
  if (deps.gate !== undefined && (path === '/gate' || path.startsWith('/gate/'))) {
    req.resume(); // a check request's body (Envoy's with_request_body) is never read
    return send(res, await deps.gate({ method, target, headers: flatHeaders(req) }));
  }
  if (method === 'GET') {
    const m = ALLOWED.exec(target);
    if (m !== null) {
      const name = decoded(m[1]!);
      const caller = m[2] === undefined ? undefined : new URLSearchParams(m[2]).get('caller');
      if (name !== null && (caller === undefined || caller === null || callerProblem(caller) === null)) {
        if (m[2] === undefined || onlyCaller(m[2]))
          return send(res, await agent.allowed(name, caller ?? undefined, requestId));
      }
    }
  }
  if (method === 'POST') {
    if (HOT_POST.test(path)) refuseCrossSite(req);
    const outcome = OUTCOMES.exec(target);
    if (outcome !== null) {
      const name = nameOf(outcome[1]!);
      const body = timed(await readJson(req, OutcomeBody, limit), agent.clock());
      return send(
        res,
        accepted(deps, [{ circuit: name, ...(body as Omit<OutcomeItem, 'circuit'>) }], target, requestId),
      );
    }
    if (path === '/outcomes') {
      const body = await readJson(req, BatchBody, BATCH_LIMIT_BYTES);
      timedBatch(body.outcomes, agent.clock());
      return send(res, accepted(deps, body.outcomes as OutcomeItem[], target, requestId));
    }
    const call = CALL.exec(target);
    if (call !== null) {
      const name = decoded(call[1]!);
      const caller = call[2] === undefined ? undefined : new URLSearchParams(call[2]).get('caller');
      const json = name === null ? undefined : agent.decidesLocally(name);
      if (
        name !== null &&
        json !== undefined &&
        (call[2] === undefined || onlyCaller(call[2])) &&
        (caller == null || callerProblem(caller) === null)
      ) {
        const text = await readText(req, limit);
        const body = validate(text, req.headers['content-type'], CallBody);
        // Creating a circuit with its own threshold or open time is the server's to do.
        if (body.threshold === undefined && body.timeout_seconds === undefined) {
          const { threshold: _t, timeout_seconds: _s, ...outcome } = body as Record<string, unknown>;
          const item = { circuit: name, ...outcome, ...(caller == null ? {} : { caller }) } as OutcomeItem;
          const answer = accepted(deps, [item], target, requestId);
          if (answer.status !== 202) return send(res, answer);
          const result = item.kind ?? (item.success === false ? 'failure' : 'success');
          return send(res, jsonAnswer(200, { result, circuit: json }, requestId));
        }
        return send(res, await agent.relay({ method, target, headers: relayHeaders(req, requestId), body: text }));
      }
    }
  }
  return passThrough(agent, req, res, target, requestId);
}

/**
 * The server's guard first: a browser's cross-site POST (403), or a Content-Type that is not
 * JSON even with no body (415): what a page on another site sends without a preflight.
 */
function refuseCrossSite(req: IncomingMessage): void {
  const refused = crossSiteProblem(req.method ?? 'POST', (name) => flatHeader(req, name));
  if (refused !== null) throw refused;
}

/**
 * The server's 422 for an `at` more than 60 s ahead, here: acknowledged, it would make the
 * server refuse the whole batch it is sent in, other clients' outcomes with it.
 */
function timed<T extends { at?: string }>(body: T, now: number): T {
  outcomeTime(body.at, now, 'at');
  return body;
}

function timedBatch(items: readonly { at?: string }[], now: number): void {
  for (const [i, o] of items.entries()) outcomeTime(o.at, now, `outcomes.${i}.at`);
}

/** Outcomes into the agent's queue: 202 once queued; 503 EDGE_QUEUE_FULL when it is full. */
function accepted(
  deps: EdgeServerDeps,
  items: readonly OutcomeItem[],
  target: string,
  requestId: string | undefined,
): EdgeAnswer {
  const refused = deps.agent.credential.outcomesRefusal(items, target.split('?', 1)[0]!);
  if (refused !== null) return deps.agent.problem(refused, target, requestId);
  if (deps.agent.accept(items)) return jsonAnswer(202, { accepted: items.length }, requestId);
  const e = new AppError('EDGE_QUEUE_FULL', 'The edge agent holds as many outcomes as it may; retry shortly.', {
    retryAfterSeconds: 1,
  });
  return deps.agent.problem(e, target, requestId);
}

/** Any other request: to the server and back, streamed, with the caller's own headers (its token, if any). */
async function passThrough(
  agent: EdgeAgent,
  req: IncomingMessage,
  res: ServerResponse,
  target: string,
  requestId: string | undefined,
): Promise<void> {
  const method = req.method ?? 'GET';
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  const headers = relayHeaders(req, requestId, true);
  let upstream: Awaited<ReturnType<EdgeAgent['dispatcher']['request']>>;
  try {
    upstream = await agent.dispatcher.request({
      method: method as 'GET',
      path: `${agent.basePath}${target}`,
      headers,
      body: hasBody && method !== 'GET' && method !== 'HEAD' ? req : undefined,
      // The event stream is long-lived: no body deadline (its heartbeats keep it alive).
      bodyTimeout: target.startsWith('/events') ? 0 : undefined,
    });
  } catch (error) {
    throw new ServerUnreachable(error);
  }
  const out: Record<string, string | string[]> = {};
  for (const [key, value] of Object.entries(upstream.headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(key)) out[key] = value;
  }
  if (upstream.headers['content-length'] !== undefined) out['content-length'] = upstream.headers['content-length'];
  res.writeHead(upstream.statusCode, out);
  res.flushHeaders();
  const body = upstream.body;
  res.on('close', () => body.destroy());
  try {
    for await (const chunk of body) if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
    res.end();
  } catch {
    res.destroy();
  }
}

function relayHeaders(req: IncomingMessage, requestId: string | undefined, all = false): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [key, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(key) || key === 'host') continue;
    if (!all && key !== 'authorization' && key !== 'content-type' && key !== 'accept' && key !== 'prefer') continue;
    headers[key] = Array.isArray(value) ? value.join(', ') : value;
  }
  if (all && req.headers['content-length'] !== undefined) headers['content-length'] = req.headers['content-length'];
  if (requestId !== undefined) headers[REQUEST_ID_HEADER] = requestId;
  return headers;
}

function flatHeader(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

function flatHeaders(req: IncomingMessage): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [key, value] of Object.entries(req.headers)) out[key] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

function incomingId(req: IncomingMessage): string | undefined {
  const id = req.headers[REQUEST_ID_HEADER];
  return typeof id === 'string' && WELL_FORMED_REQUEST_ID.test(id) ? id : undefined;
}

function onlyCaller(query: string): boolean {
  const params = new URLSearchParams(query);
  for (const key of params.keys()) if (key !== 'caller') return false;
  return params.getAll('caller').length <= 1;
}

function decoded(segment: string): string | null {
  try {
    const name = decodeURIComponent(segment);
    return circuitNameProblem(name) === null ? name : null;
  } catch {
    return null;
  }
}

/** The circuit named in the path, or the server's 400 INVALID_NAME. */
function nameOf(segment: string): string {
  let name: string;
  try {
    name = decodeURIComponent(segment);
  } catch {
    name = segment;
  }
  const problem = circuitNameProblem(name);
  if (problem !== null)
    throw new AppError('INVALID_NAME', `Circuit name ${problem}.`, { extensions: { name: name.slice(0, 300) } });
  return name;
}

function jsonAnswer(status: number, value: unknown, requestId?: string): EdgeAnswer {
  return {
    status,
    headers: { ...JSON_HEADERS, [REQUEST_ID_HEADER]: requestId ?? newRequestId() },
    body: `${JSON.stringify(value)}\n`,
  };
}

function send(res: ServerResponse, answer: EdgeAnswer): void {
  if (res.headersSent) return;
  // RFC 9110 section 8.6: no Content-Length on a 204 (nor a body).
  if (answer.status === 204 || answer.status === 304) {
    res.writeHead(answer.status, answer.headers);
    res.end();
    return;
  }
  res.writeHead(answer.status, { ...answer.headers, 'content-length': Buffer.byteLength(answer.body) });
  res.end(answer.body);
}

/** The body as the server reads it: JSON by Content-Type, within `limitBytes`, checked by `schema` (no body: `{}`). */
async function readJson<S extends z.ZodTypeAny>(
  req: IncomingMessage,
  schema: S,
  limitBytes: number,
): Promise<z.output<S>> {
  const text = await readText(req, limitBytes);
  return validate(text, req.headers['content-type'], schema);
}

/** The body as the server reads it (route-kit's one rule): an empty body counts as none. */
function validate<S extends z.ZodTypeAny>(text: string, contentType: string | undefined, schema: S): z.output<S> {
  return bodyOf(text === '' ? null : text, contentType, schema);
}

function readText(req: IncomingMessage, limitBytes: number): Promise<string> {
  const length = req.headers['content-length'];
  if (length !== undefined && Number(length) > limitBytes) {
    req.resume();
    return Promise.reject(tooLarge(limitBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge(limitBytes));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function tooLarge(limitBytes: number): AppError {
  return new AppError('PAYLOAD_TOO_LARGE', `Request bodies are limited to ${limitBytes} bytes.`);
}
