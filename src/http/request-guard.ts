import type { IncomingMessage } from 'node:http';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { AppError } from '../domain/errors.js';
import { tokenProblem } from './auth.js';
import { crossSiteProblem, misdirected, type HeaderReader, type HostRule } from './browser-guard.js';
import { rawRequestPath } from './raw-path.js';
import { bindRequestId, REQUEST_ID_HEADER, requestIdFrom, withRequestIdHeader } from '../request-id.js';

/**
 * The app-wide guards, in order: the Host check (421), the cross-site refusal (403/415; not
 * under /proxy) and the bearer token on TOKEN_PATHS (401). They run in front of Hono's router
 * as one synchronous check rather than as middlewares: a middleware makes Hono compose the
 * route (an async function and a promise per handler, so even the synchronous `/allowed`
 * answer waits for microtasks), and `c.req.header()` builds a WHATWG `Headers` object from
 * Node's raw headers. A passing request goes to the router as it came; a refused one is
 * answered here, logged and rendered as the app's error handler does (`answer`).
 */

/** The app's problem answer for a refusal (http/fallbacks.ts `problemAnswer`). */
export type ProblemAnswer = (method: string, path: string, error: AppError, requestId: string) => Response;

/** The guards' verdict on a request: the first refusal, or null when every guard lets it through. */
export type RequestGuard = (method: string, path: string, header: HeaderReader) => AppError | null;

/** The Host check, the cross-site refusal (not under /proxy) and the token, in that order. */
export function requestGuard(hosts: HostRule | null, token: string | undefined): RequestGuard {
  const needToken = token ? tokenProblem(token) : null;
  return (method, path, header) =>
    misdirected(hosts, header('host')) ??
    (isProxyPath(path) ? null : crossSiteProblem(method, header)) ??
    needToken?.(path, header('authorization')) ??
    null;
}

/**
 * Put the guards in front of `app.fetch` (which `app.request()` and the server both call),
 * after the request id (src/request-id.ts) is bound: a refusal carries it too.
 */
export function guardFetch(app: OpenAPIHono, guard: RequestGuard, answer: ProblemAnswer): void {
  const dispatch = app.fetch;
  app.fetch = (request, env, executionCtx) => {
    const path = rawRequestPath(request, { env });
    const method = request.method;
    const header = headerReader(request, env);
    const requestId = requestIdFrom(header(REQUEST_ID_HEADER));
    const bound = bindRequestId(env, requestId, isProxyPath(path));
    const error = guard(method, path, header);
    if (error === null) {
      const response = dispatch(request, bound, executionCtx);
      return bound.outgoing === undefined ? withRequestIdHeader(response, requestId) : response;
    }
    const response = answer(method, path, error, requestId);
    return method === 'HEAD' ? new Response(null, response) : response;
  };
}

/** Proxied requests are the upstream's business: its own CSRF rules apply, not these. */
function isProxyPath(path: string): boolean {
  return path === '/proxy' || path.startsWith('/proxy/');
}

/**
 * Headers by name as `Headers.get` gives them (repeats joined with ", ", outer whitespace
 * trimmed), read from Node's raw headers when served by @hono/node-server (no `Headers`
 * object is built), else from the Request (`app.request()`).
 */
export function headerReader(request: Request, env: unknown): HeaderReader {
  const incoming = (env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (incoming === undefined) return (name) => request.headers.get(name) ?? undefined;
  return rawHeaderReader(incoming);
}

/** `headerReader` on Node's request itself. */
export function rawHeaderReader(incoming: IncomingMessage): HeaderReader {
  const raw = incoming.rawHeaders;
  return (name) => {
    let value: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const key = raw[i]!;
      if (key.length !== name.length || key.toLowerCase() !== name) continue;
      const one = trimWhitespace(raw[i + 1]!);
      value = value === undefined ? one : `${value}, ${one}`;
    }
    return value;
  };
}

/** HTTP's whitespace (tab, LF, CR, space) off both ends, as `Headers` normalises a value. */
function trimWhitespace(value: string): string {
  return /^[\t\n\r ]|[\t\n\r ]$/.test(value) ? value.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '') : value;
}
