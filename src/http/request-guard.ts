import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { type Authenticator, needsToken, unauthorized } from '../auth/bearer.js';
import type { PendingAuthenticator } from '../auth/jwt-bearer.js';
import { ANONYMOUS, circuitPermitted, type Identity, type Scope } from '../auth/identity.js';
import { circuitNotPermitted, insufficientScope } from '../auth/refusal.js';
import { allowsRoute, routeScope } from '../auth/route-scopes.js';
import { bindIdentity } from '../auth/request-identity.js';
import { AppError } from '../domain/errors.js';
import { bindRequestId, REQUEST_ID_HEADER, requestIdFrom, withRequestIdHeader } from '../request-id.js';

/**
 * What every request passes before routing: the raw path it is routed on, and the app-wide
 * guards, in order: the Host check (421), the cross-site refusal (403/415; not
 * under /proxy) and the bearer token on TOKEN_PATHS (401). They run in front of Hono's router
 * as one synchronous check rather than as middlewares: a middleware makes Hono compose the
 * route (an async function and a promise per handler, so even the synchronous `/allowed`
 * answer waits for microtasks), and `c.req.header()` builds a WHATWG `Headers` object from
 * Node's raw headers. A passing request goes to the router as it came; a refused one is
 * answered here, logged and rendered as the app's error handler does (`answer`).
 */

/** The app's problem answer for a refusal (http/fallbacks.ts `problemAnswer`). */
export type ProblemAnswer = (method: string, path: string, error: AppError, requestId: string) => Response;

/**
 * The guards' verdict on a request: the first refusal, or who the request is when every guard
 * lets it through (`ANONYMOUS` where no credential is asked for). A promise only while a JWT
 * not seen before is verified (auth/jwt-bearer.ts); every other verdict is synchronous.
 */
export type RequestGuard = (method: string, path: string, header: HeaderReader) => Verdict | Promise<Verdict>;

export type Verdict = AppError | Identity;

/** The Host check, the cross-site refusal (not under /proxy) and the credential, in that order. */
export function requestGuard(
  hosts: HostRule | null,
  authenticate: Authenticator | PendingAuthenticator | null,
): RequestGuard {
  return (method, path, header) => {
    const refusal = misdirected(hosts, header('host')) ?? (isProxyPath(path) ? null : crossSiteProblem(method, header));
    if (refusal !== null) return refusal;
    if (authenticate === null || !needsToken(path)) return ANONYMOUS;
    const authorization = header('authorization');
    const identity = authenticate(authorization);
    if (identity instanceof Promise)
      return identity.then((found) => credentialVerdict(found, authorization, method, path));
    return credentialVerdict(identity, authorization, method, path);
  };
}

function credentialVerdict(
  identity: Identity | null,
  authorization: string | undefined,
  method: string,
  path: string,
): Verdict {
  if (identity === null) return unauthorized(authorization === undefined ? 'missing' : 'invalid');
  return routePermitted(identity, method, path);
}

/**
 * The scope the route needs (auth/route-scopes.ts) and, on a circuit's route, the circuit
 * within the credential's `circuits` patterns: the identity, or the 403. An identity with
 * every scope and every circuit (CIRCUITLOG_TOKEN's) passes without a look at the table.
 */
const UNLISTED = { scope: 'admin', rawName: null } as const;

function routePermitted(identity: Identity, method: string, path: string): AppError | Identity {
  if (identity.circuits === null && identity.scopes.has('admin')) return identity;
  // A guarded path the table does not list (a typo's 404, a 405, a route added without its row)
  // fails closed: only `admin` gets past to the router's answer.
  const route = routeScope(method, path) ?? UNLISTED;
  if (!allowsRoute(identity, route.scope)) return insufficientScope(route.scope as Scope, method, path);
  if (route.rawName === null || identity.circuits === null) return identity;
  const name = decodedSegment(route.rawName);
  // An undecodable name is the route's 400; a permitted one goes on.
  if (name === null || circuitPermitted(identity, name)) return identity;
  return circuitNotPermitted(name);
}

function decodedSegment(segment: string): string | null {
  if (!segment.includes('%')) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
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
    const settle = (verdict: Verdict) => {
      if (!(verdict instanceof AppError)) {
        if (verdict !== ANONYMOUS) bindIdentity(bound, verdict);
        const response = dispatch(request, bound, executionCtx);
        return bound.outgoing === undefined ? withRequestIdHeader(response, requestId) : response;
      }
      const response = answer(method, path, verdict, requestId);
      return method === 'HEAD' ? new Response(null, response) : response;
    };
    const verdict = guard(method, path, header);
    return verdict instanceof Promise ? verdict.then(settle) : settle(verdict);
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
  // Two character checks rather than a regular expression: node:http hands values over trimmed.
  const trimmed = !isWhitespace(value.charCodeAt(0)) && !isWhitespace(value.charCodeAt(value.length - 1));
  return trimmed ? value : value.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
}

const isWhitespace = (code: number) => code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;

// The raw path: what the guards and the router read.

/**
 * The path the caller sent, still percent-encoded, without the query: the request target
 * from Node (before WHATWG URL parsing resolves `.`/`..` segments, also encoded ones), or,
 * under `app.request()`, the URL's path. Hono routes on this (its `getPath` option), so a
 * gateway that checks path prefixes on the raw URI sees what the router sees.
 */
export function rawRequestPath(request: Request, options?: { env?: unknown }): string {
  const incoming = (options?.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  return targetPath(incoming?.url ?? request.url);
}

/** The path of a request target: origin-form (`/a?b`) or absolute-form (`http://h/a?b`). */
function targetPath(target: string): string {
  let start = 0;
  if (target[0] !== '/') {
    const authority = target.indexOf('//');
    start = authority === -1 ? -1 : target.indexOf('/', authority + 2);
    if (start === -1) return '/';
  }
  let end = target.length;
  for (let i = start; i < target.length; i++) {
    const ch = target.charCodeAt(i);
    if (ch === 63 /* ? */ || ch === 35 /* # */) {
      end = i;
      break;
    }
  }
  return target.slice(start, end);
}

/** True if a raw segment is `.` or `..` once decoded (`%2e`, `%2E`, `.%2e`, ...). */
function isDotSegment(segment: string): boolean {
  if (segment === '.' || segment === '..') return true;
  if (!segment.includes('%') || segment.length > 6) return false;
  const decoded = segment.replace(/%2e/gi, '.');
  return decoded === '.' || decoded === '..';
}

/**
 * A `.`/`..` segment under /circuits, encoded or not: a 400 INVALID_NAME, as the README
 * promises and the proxy does. The router never resolves them (it routes on the raw path):
 * in a name's place the name check refuses them; anywhere else no route matches, and the
 * not-found handler asks this before answering 404 or 405.
 */
export function dotSegmentProblem(path: string): AppError | null {
  if (path !== '/circuits' && !path.startsWith('/circuits/')) return null;
  if (!path.split('/').some(isDotSegment)) return null;
  return new AppError('INVALID_NAME', "Circuit names have no '.' or '..' segments, and paths are not resolved.");
}

// The browser guards, against a browser being used as the attacker's client while no token is
// set (the default): DNS rebinding (a hostile name resolved to this server's loopback address)
// and cross-site requests that change state (CSRF). See docs/api.md, "Browsers".

/** Which `Host` names the server answers; null: no check (bound to a public address, no list). */
export type HostRule = ((hostname: string) => boolean) | null;

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);
const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (net.isIPv4(h)) return h.startsWith('127.');
  return h === '::1';
}

/**
 * The Host rule for a listen address and `server.allowed_hosts`. An IP literal and
 * `localhost` (RFC 6761: never resolved elsewhere) are always allowed: rebinding needs a
 * name the attacker controls. With a list, its names are allowed too (`.example.com`
 * allows the domain and every subdomain), whatever the listen address; without one, a
 * server on loopback allows nothing else and one on another address checks nothing.
 */
export function hostRule(listenHost: string, allowedHosts: readonly string[] | undefined): HostRule {
  const listed = (allowedHosts ?? []).map((h) => h.toLowerCase());
  if (listed.length === 0 && !isLoopback(listenHost)) return null;
  const names = new Set([...listed.filter((h) => !h.startsWith('.')), listenHost.toLowerCase()]);
  const domains = listed.filter((h) => h.startsWith('.'));
  return (hostname) => {
    const h = hostname.toLowerCase().replace(/\.$/, '');
    if (net.isIP(h.replace(/^\[|\]$/g, '')) !== 0 || h === 'localhost' || h.endsWith('.localhost')) return true;
    return names.has(h) || domains.some((d) => h === d.slice(1) || h.endsWith(d));
  };
}

/** The host name of a `Host` header value (no port; IPv6 keeps its brackets). */
export function hostnameOf(host: string): string {
  return host.startsWith('[') ? host.slice(0, host.indexOf(']') + 1) : host.replace(/:\d*$/, '');
}

/**
 * The Host values a rule last judged, per rule: callers send the same few Host headers again and
 * again, and the judgement (a port stripped, case folded, an IP literal parsed) runs per request.
 * Bounded: at most HOST_MEMO_ENTRIES values of at most HOST_MEMO_MAX_LENGTH characters each
 * (under 70 KB per rule), emptied when full.
 */
const hostMemos = new WeakMap<(hostname: string) => boolean, Map<string, boolean>>();
const HOST_MEMO_ENTRIES = 256;
const HOST_MEMO_MAX_LENGTH = 260; // a DNS name (253) with a port

function hostAllowed(rule: (hostname: string) => boolean, host: string): boolean {
  if (host.length > HOST_MEMO_MAX_LENGTH) return rule(hostnameOf(host));
  let memo = hostMemos.get(rule);
  if (memo === undefined) hostMemos.set(rule, (memo = new Map()));
  let allowed = memo.get(host);
  if (allowed === undefined) {
    allowed = rule(hostnameOf(host));
    if (memo.size >= HOST_MEMO_ENTRIES) memo.clear();
    memo.set(host, allowed);
  }
  return allowed;
}

/** The 421 for a Host the rule refuses, or null. A request without Host (HTTP/1.0) passes. */
export function misdirected(
  rule: HostRule,
  host: string | undefined,
  setting = 'server.allowed_hosts',
): AppError | null {
  if (rule === null || host === undefined || host === '' || hostAllowed(rule, host)) return null;
  return new AppError(
    'MISDIRECTED_REQUEST',
    `This server does not answer for the host '${hostnameOf(host).slice(0, 100)}'; add it to ${setting} if it is yours.`,
  );
}

/** A request header by its lower-case name, `undefined` when absent. */
export type HeaderReader = (name: string) => string | undefined;

/**
 * State-changing requests (every method but GET, HEAD, OPTIONS): refuse one a browser
 * marks as cross-origin, as Go's `http.CrossOriginProtection` does: `Sec-Fetch-Site` other
 * than `same-origin` or `none` (typed URL, bookmark), else an `Origin` whose host is not
 * the `Host` (`null` included): 403. Then a `Content-Type`, when sent, must be JSON (415,
 * even with an empty body): a form or `text/plain` is what a cross-site page can send
 * without a preflight. No header at all (curl, the clients) passes. Null when it passes.
 */
export function crossSiteProblem(method: string, header: HeaderReader): AppError | null {
  if (SAFE_METHODS.has(method)) return null;
  const site = header('sec-fetch-site');
  const origin = header('origin');
  if (
    site !== undefined
      ? site !== 'same-origin' && site !== 'none'
      : origin !== undefined && !sameOrigin(origin, header('host'))
  ) {
    return new AppError(
      'CROSS_SITE_REQUEST',
      `A ${method} from another site (${site !== undefined ? `Sec-Fetch-Site: ${site}` : `Origin: ${origin!.slice(0, 100)}`}) is refused: it could be a forged request.`,
    );
  }
  const type = header('content-type');
  if (type !== undefined && !JSON_TYPE.test(type)) {
    return new AppError(
      'UNSUPPORTED_MEDIA_TYPE',
      `Content-Type '${type.slice(0, 100)}' is refused on ${method}: send JSON (application/json), or no body and no Content-Type.`,
    );
  }
  return null;
}

/** Does the Origin name this server as the Host does (host name, and port when Host has one)? */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined || !URL.canParse(origin)) return false;
  const url = new URL(origin);
  const hostname = hostnameOf(host).toLowerCase();
  const port = host.slice(hostnameOf(host).length + 1);
  const originPort = url.port || (url.protocol === 'https:' ? '443' : '80');
  return url.hostname === hostname && (port === '' || port === originPort);
}
