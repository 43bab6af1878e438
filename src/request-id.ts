import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The request id: every answer carries one in `X-Request-Id`, every problem document in
 * `request_id`, every log line about the request in `request_id`, and the proxy sends it to
 * the node. A well-formed incoming id is kept (the caller's, or a load balancer's before us);
 * anything else is replaced by a made one and never echoed.
 *
 * Hono's `requestId` middleware (hono/request-id) makes the same choice with the same check,
 * but it runs inside the router; the id is needed before it (the guards' refusals) and on
 * the answers that bypass Hono (raw-allowed.ts, raw-listeners.ts), so the rule lives here
 * once and every path calls `requestIdFrom`.
 */
export const REQUEST_ID_HEADER = 'x-request-id';

/** The problem document member and the log field (snake_case, as every other member). */
export const REQUEST_ID_FIELD = 'request_id';

/** Hono's default check: 1 to 255 of `A-Z a-z 0-9 _ - =` (a UUID, hex, base64url, `Root=1-…`). */
export const WELL_FORMED_REQUEST_ID = /^[\w\-=]{1,255}$/;

/** The caller's `X-Request-Id` when well-formed, else a new random UUID (RFC 9562 version 4). */
export function requestIdFrom(incoming: string | undefined): string {
  return incoming !== undefined && WELL_FORMED_REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** `requestIdFrom` on Node's request (repeated fields come joined with ', ', as `Headers` joins them: not well-formed). */
export function incomingRequestId(incoming: IncomingMessage): string {
  const value = incoming.headers[REQUEST_ID_HEADER];
  return requestIdFrom(typeof value === 'string' ? value : undefined);
}

/** What @hono/node-server passes as `c.env`, plus the id `guardFetch` put there (http/request-guard.ts). */
export interface RequestEnv {
  requestId?: string;
}

/** The id of the request a Hono context serves (set by `guardFetch` before the router). */
export function contextRequestId(c: { env: unknown }): string {
  return (c.env as RequestEnv | undefined)?.requestId ?? randomUUID(); // always set when served through app.fetch
}

/**
 * Bind the id to one request on its way into Hono's router: the env the routes read it from
 * (`contextRequestId`), and the answer's header. Served by @hono/node-server, Node's response
 * is stamped (`stampResponse`), so every way the answer is written carries it (a Response, a
 * stream, a route writing on `outgoing` itself); under `app.request()` it is added to the
 * Response (`withRequestIdHeader`).
 */
export function bindRequestId(env: unknown, requestId: string): RequestEnv & { outgoing?: ServerResponse } {
  if (typeof env !== 'object' || env === null) return { requestId };
  const bound = env as RequestEnv & { outgoing?: ServerResponse };
  bound.requestId = requestId;
  if (bound.outgoing !== undefined) stampResponse(bound.outgoing, requestId);
  return bound;
}

const STAMP = Symbol('requestId');
type Stamped = ServerResponse & { [STAMP]: string };

/**
 * Make Node's response write `X-Request-Id` in its head, unless the head already has one.
 * Not `setHeader`: a response with headers set beforehand takes node:http's slow `writeHead`
 * (every field through `setHeader`: more than twice the time of a small answer's head), which on
 * Node 20 also keeps only the last of repeated fields in a flat list (a proxied Set-Cookie).
 */
function stampResponse(outgoing: ServerResponse, requestId: string): void {
  (outgoing as Stamped)[STAMP] = requestId;
  outgoing.writeHead = writeHeadWithRequestId as ServerResponse['writeHead'];
}

function writeHeadWithRequestId(this: Stamped, statusCode: number, ...rest: unknown[]): ServerResponse {
  const at = typeof rest[0] === 'string' ? 1 : 0; // writeHead(statusCode, [statusMessage], [headers])
  rest[at] = withRequestIdField(rest[at], this[STAMP]);
  const writeHead = (Object.getPrototypeOf(this) as ServerResponse).writeHead as (...args: unknown[]) => ServerResponse;
  return writeHead.call(this, statusCode, ...rest);
}

/** The head's fields with the id added, as a copy (the caller's object may be a shared constant). */
function withRequestIdField(headers: unknown, requestId: string): unknown {
  if (headers === undefined || headers === null) return { [REQUEST_ID_HEADER]: requestId };
  if (Array.isArray(headers)) {
    for (let i = 0; i < headers.length; i += 2) if (headers[i] === REQUEST_ID_HEADER) return headers;
    return [...headers, REQUEST_ID_HEADER, requestId];
  }
  return REQUEST_ID_HEADER in (headers as object)
    ? headers
    : { ...(headers as object), [REQUEST_ID_HEADER]: requestId };
}

/** The answer with `X-Request-Id` set, for a caller with no Node response (`app.request()`). */
export function withRequestIdHeader(
  answer: Response | Promise<Response>,
  requestId: string,
): Response | Promise<Response> {
  if (answer instanceof Promise) return answer.then((response) => withRequestIdHeader(response, requestId));
  answer.headers.set(REQUEST_ID_HEADER, requestId);
  return answer;
}
