import { STATUS_CODES, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AppError } from '../domain/errors.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import { REQUEST_ID_FIELD, REQUEST_ID_HEADER } from '../request-id.js';

/**
 * The one place problems are rendered (RFC 9457), for the three ways circuitlog answers:
 * a Hono `Response`, a raw `ServerResponse` (the proxy's listener) and a raw socket (upgrade,
 * CONNECT, start-up). The codes' statuses, types and titles are `domain/problem-codes.ts`.
 */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** A rendered problem: status, headers and the JSON text (ending with a newline). */
export interface ProblemParts {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/**
 * A request path as a valid URI reference (RFC 9457's `instance`): what was sent, with a
 * stray '%' and any character RFC 3986 does not allow in a path percent-encoded.
 */
export function uriReference(path: string): string {
  return path.replace(/%(?![0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+,;=:@/%]/gu, percentEncode);
}

/** UTF-8 percent-encoding that, unlike encodeURIComponent, never throws (a lone surrogate becomes U+FFFD). */
function percentEncode(ch: string): string {
  let out = '';
  for (const byte of Buffer.from(ch, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return out;
}

/**
 * The status, headers and body of the problem document for an AppError. An `instance` of
 * `undefined` leaves the member out (where the request is not known, rather than guess it).
 * The request id goes in the `request_id` member and the `X-Request-Id` header (request-id.ts).
 */
export function problemParts(
  error: AppError,
  instance: string | undefined,
  requestId: string,
  now: number,
): ProblemParts {
  const entry = PROBLEMS[error.code];
  const { fields, retryAt, retryAfterSeconds, extensions, headers } = error.options;
  const body: Record<string, unknown> = {
    type: entry.type,
    title: entry.title,
    status: entry.status,
    detail: error.message,
  };
  if (instance !== undefined) body.instance = uriReference(instance);
  body[REQUEST_ID_FIELD] = requestId;
  body.code = error.code;
  Object.assign(body, extensions);
  if (fields) body.errors = fields;
  const responseHeaders: Record<string, string> = {
    [REQUEST_ID_HEADER]: requestId,
    'content-type': PROBLEM_CONTENT_TYPE,
    ...headers,
  };
  if (retryAt !== undefined) {
    // RFC 9110 section 10.2.3: delay-seconds, a whole number; never 0 so callers back off.
    responseHeaders['retry-after'] = String(Math.max(1, Math.ceil((retryAt - now) / 1000)));
  } else if (retryAfterSeconds !== undefined) {
    responseHeaders['retry-after'] = String(Math.max(1, Math.ceil(retryAfterSeconds)));
  }
  return { status: entry.status, headers: responseHeaders, body: `${JSON.stringify(body)}\n` }; // JSON answers end with a newline
}

/** The same problem as a bare `Response` where no Hono context exists (`instance` left out). */
export function problemFetchResponse(error: AppError, requestId: string, now: number): Response {
  const { status, headers, body } = problemParts(error, undefined, requestId, now);
  return new Response(body, { status, headers });
}

/** What a problem is rendered from: `problemParts`' arguments. */
type ProblemArgs = Parameters<typeof problemParts>;

/** Answer a raw `ServerResponse` with the problem (its caller checks that no head was sent). */
export function writeProblem(outgoing: ServerResponse, ...problem: ProblemArgs): void {
  const { status, headers, body } = problemParts(...problem);
  // Framed by its length, as the Hono routes send it (a head written first would be chunked).
  outgoing.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(body)) }).end(body);
}

/** Answer on a raw socket (an upgrade, CONNECT, start-up) with the problem, then close it. */
export function endSocketWithProblem(socket: Duplex, ...problem: ProblemArgs): void {
  const { status, headers, body } = problemParts(...problem);
  const lines = Object.entries({ ...headers, 'content-length': String(Buffer.byteLength(body)), connection: 'close' });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${lines.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`,
  );
}
