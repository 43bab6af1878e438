import { EventEmitter } from 'node:events';
import type { TLSSocket } from 'node:tls';
import { Readable } from 'node:stream';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import type { BreakerService, Clock } from '../service/breaker-service.js';
import { fallbackResponse } from './fallback.js';
import type { ProxyHooks } from './proxy-hooks.js';
import { downstreamResponseHeaders, upstreamRequestHeaders, type HeaderRecord } from './forward-headers.js';
import { ReplayableBody } from './replayable-body.js';
import { discardBody, sendResponse } from './send-response.js';
import { StaleCache } from './stale-cache.js';
import { parseProxyTarget, type ProxyTarget } from './target-path.js';
import type { UpstreamClient, UpstreamResponse } from './upstream-client.js';
import { isNothingSent } from './upstream-client.js';
import { pickNode, type ProxyNode, type Upstream } from './upstreams.js';

/** Methods the proxy forwards; TRACE and CONNECT are refused (RFC 9110 sections 9.3.6 and 9.3.8). */
export const FORWARDED_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'];
/** Methods that may be replayed on another node after reaching one (RFC 9110 section 9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
const REPLAY_BUFFER_BYTES = 1024 * 1024; // 1 MiB of request body kept for a retry
const NO_BODY_STATUSES = new Set([204, 205, 304]);

export interface ProxyHandlerDeps {
  readonly upstreams: ReadonlyMap<string, Upstream>;
  readonly breaker: BreakerService;
  readonly client: UpstreamClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly localDc: string;
  readonly hooks?: ProxyHooks;
}

/** One request to proxy: from @hono/node-server or the fast path, `incoming`/`outgoing` are set; from `app.request()`, `raw`. */
export interface ProxyInput {
  readonly method: string;
  /** The full request URL (only read when `incoming` is absent). */
  readonly url: string;
  readonly raw?: Request;
  readonly incoming?: IncomingMessage;
  readonly outgoing?: ServerResponse;
}

export type ProxyHandler = (input: ProxyInput) => Promise<Response>;

/** For the hooks: which upstream a request was for, who answered and with what status. */
interface Report {
  upstream?: string;
  node: ProxyNode | null;
  status: number;
}

interface Call {
  readonly input: ProxyInput;
  readonly upstream: Upstream;
  readonly target: ProxyTarget;
  readonly method: string;
  readonly requestHeaders: HeaderRecord;
  readonly headers: Record<string, string | string[]>;
  readonly body: ReplayableBody | null;
  readonly report: Report;
  /** Hands the bulkhead slot to the response body; true once handed over. */
  handedOff: boolean;
}

type Outcome =
  | { readonly kind: 'answer'; readonly node: ProxyNode; readonly response: UpstreamResponse; readonly failed: boolean }
  | { readonly kind: 'timeout' | 'unreachable' | 'refused'; readonly node: ProxyNode }
  | { readonly kind: 'caller_gone' };

function hasBody(headers: HeaderRecord): boolean {
  const length = headers['content-length'];
  return (length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined;
}

/** The abort signal of one attempt: fired by its timer, or by the caller leaving (see `attempt`). */
class AttemptAbort extends EventEmitter {
  aborted = false;
  reason: 'timeout' | 'caller_gone' | null = null;

  fire(reason: 'timeout' | 'caller_gone'): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

/** The `/proxy/:upstream/*` handler: pick a node, forward, fail over, fall back. */
export function createProxyHandler(deps: ProxyHandlerDeps): ProxyHandler {
  const { breaker, client, logger } = deps;

  async function attempt(call: Call, node: ProxyNode): Promise<Outcome> {
    const cfg = call.upstream.config;
    // A plain EventEmitter as the abort signal: an AbortController (an EventTarget) per
    // attempt costs more than all of the breaker bookkeeping of a proxied request.
    const abort = new AttemptAbort();
    const timer = setTimeout(() => abort.fire('timeout'), cfg.request_timeout_ms);
    // A caller that hangs up before the head arrives cancels the attempt: the node's work
    // and the bulkhead slot are freed at once, and it says nothing against the node.
    const outgoing = call.input.outgoing;
    const onCallerGone = () => abort.fire('caller_gone');
    outgoing?.once('close', onCallerGone);
    try {
      const response = await client.request({
        origin: node.origin,
        path: node.basePath + call.target.path,
        method: call.method,
        headers: call.headers,
        body: call.body?.attempt() ?? null,
        signal: abort,
        bodyTimeoutMs: cfg.request_timeout_ms,
      });
      return { kind: 'answer', node, response, failed: call.upstream.failureStatuses.has(response.status) };
    } catch (error) {
      if (call.body?.sourceError || abort.reason === 'caller_gone') return { kind: 'caller_gone' };
      const kind = abort.reason === 'timeout' ? 'timeout' : isNothingSent(error) ? 'refused' : 'unreachable';
      logger.warn({ event: 'upstream_failed', upstream: call.upstream.name, node: node.id, kind, err: (error as Error).message }, `${node.circuit}: ${kind}`);
      return { kind, node };
    } finally {
      clearTimeout(timer);
      outgoing?.off('close', onCallerGone);
    }
  }

  async function forward(call: Call): Promise<Response> {
    const { upstream } = call;
    const create = { create: upstream.settings };
    const tried = new Set<ProxyNode>();
    let budget = upstream.config.retries;
    let last: Outcome | null = null;
    for (;;) {
      const pick = pickNode(upstream, breaker, tried);
      if (pick.node === null) {
        if (last === null) return noNodeAvailable(call, pick.retryAt);
        return giveUp(call, last);
      }
      if (last?.kind === 'answer') discardBody(last.response.body);
      tried.add(pick.node);
      const outcome = await attempt(call, pick.node);
      if (outcome.kind === 'caller_gone') return new Response(null, { status: 499 });
      if (outcome.kind === 'answer' && !outcome.failed) return answer(call, outcome.node, outcome.response, true);
      breaker.record(pick.node.circuit, false, create);
      last = outcome;
      const replayable = call.body === null || call.body.replayable;
      if (outcome.kind === 'refused' && replayable) continue; // nothing was sent: free to move on
      if (!IDEMPOTENT.has(call.method) || budget === 0 || !replayable) return giveUp(call, last);
      budget--;
    }
  }

  function giveUp(call: Call, last: Outcome): Response {
    switch (last.kind) {
      case 'answer':
        return answer(call, last.node, last.response, false); // an upstream 5xx goes back as sent
      case 'timeout':
        return fallbackOr(call, new AppError('UPSTREAM_TIMEOUT', `No node of '${call.upstream.name}' answered within ${call.upstream.config.request_timeout_ms} ms.`));
      case 'refused':
      case 'unreachable':
        return fallbackOr(call, new AppError('UPSTREAM_UNREACHABLE', `No node of '${call.upstream.name}' could be reached.`));
      case 'caller_gone':
        return new Response(null, { status: 499 });
    }
  }

  function noNodeAvailable(call: Call, retryAt: number | null): Response {
    const detail = `Every node of '${call.upstream.name}' has an open circuit; no node was contacted.`;
    return fallbackOr(call, new AppError('NO_NODE_AVAILABLE', detail, retryAt === null ? { retryAfterSeconds: 1 } : { retryAt }));
  }

  function fallbackOr(call: Call, error: AppError): Response {
    call.body?.discard();
    const fallback = fallbackResponse(call.upstream, call.method, staleKey(call), deps.clock());
    if (fallback === null) throw error;
    call.report.status = fallback.status;
    deps.hooks?.proxyFallback(call.upstream.name, fallback.headers['x-fallback'] as 'stale' | 'static');
    logger.info({ event: 'fallback', upstream: call.upstream.name, kind: fallback.headers['x-fallback'], code: error.code }, error.message);
    return sendResponse(call.input.outgoing, fallback.status, fallback.headers, fallback.body);
  }

  /** Pass a node's answer on; with `judge`, its outcome goes to the node's circuit. */
  function answer(call: Call, node: ProxyNode, res: UpstreamResponse, judge: boolean): Response {
    const headers = downstreamResponseHeaders(res.headers);
    headers['x-node'] = node.id;
    headers['x-dc'] = node.dc;
    headers['x-degraded'] = node.local ? 'false' : 'true';
    call.report.node = node;
    call.report.status = res.status;
    if (call.method === 'HEAD' || NO_BODY_STATUSES.has(res.status)) {
      if (judge) breaker.record(node.circuit, true, { create: call.upstream.settings });
      discardBody(res.body);
      return sendResponse(call.input.outgoing, res.status, headers, null);
    }
    if (judge) judgeByBody(call, node, res.body);
    const stale = call.upstream.stale;
    if (stale !== null && call.method === 'GET' && StaleCache.mayStore(call.requestHeaders, res.status, res.headers)) {
      stale.capture(staleKey(call), res.status, downstreamResponseHeaders(res.headers), res.body, deps.clock);
    }
    call.handedOff = true;
    res.body.once('close', () => call.upstream.inFlight--);
    return sendResponse(call.input.outgoing, res.status, headers, res.body);
  }

  /**
   * A forwarded answer is a success only once its body has ended: a reset or a silence
   * over request_timeout_ms inside the body is a node failure, even though the head was
   * already passed on. A body cut by the caller leaving says nothing against the node.
   */
  function judgeByBody(call: Call, node: ProxyNode, body: Readable): void {
    let judged = false;
    const judge = (success: boolean) => {
      if (judged) return;
      judged = true;
      breaker.record(node.circuit, success, { create: call.upstream.settings });
    };
    body.once('end', () => judge(true));
    body.once('error', (error: Error & { code?: string }) => {
      // Runs before pipeline() reacts to the error: a destroyed `outgoing` means the caller broke first.
      const nodeFault = call.input.outgoing?.destroyed !== true && isNodeBodyError(error);
      if (nodeFault) {
        logger.warn({ event: 'upstream_failed', upstream: call.upstream.name, node: node.id, kind: 'body', err: error.message }, `${node.circuit}: body failed`);
      }
      judge(!nodeFault);
    });
    body.once('close', () => judge(true));
  }

  const handle = async (input: ProxyInput, report: Report): Promise<Response> => {
    const { incoming, method } = input;
    if (!FORWARDED_METHODS.includes(method)) {
      throw new AppError('METHOD_NOT_ALLOWED', `${method} is not forwarded.`, { headers: { allow: FORWARDED_METHODS.join(', ') } });
    }
    // The raw target, before URL normalisation resolves dot segments we must refuse.
    const target = parseProxyTarget(incoming?.url ?? rawTarget(input.url));
    const upstream = deps.upstreams.get(target.upstream);
    if (upstream === undefined) throw new AppError('UPSTREAM_NOT_FOUND', `No upstream named '${target.upstream.slice(0, 100)}'.`);
    report.upstream = upstream.name;
    const max = upstream.config.max_concurrent;
    if (max !== undefined && upstream.inFlight >= max) {
      throw new AppError('BULKHEAD_FULL', `'${upstream.name}' already has ${max} requests in flight.`, { retryAfterSeconds: 1 });
    }
    const requestHeaders: HeaderRecord = incoming?.headers ?? Object.fromEntries(input.raw?.headers ?? []);
    const headers = upstreamRequestHeaders(requestHeaders, {
      clientIp: incoming?.socket.remoteAddress,
      proto: incoming ? ((incoming.socket as TLSSocket).encrypted ? 'https' : 'http') : new URL(input.url).protocol.slice(0, -1),
      localDc: deps.localDc,
    });
    let source: Readable | null = null;
    if (incoming !== undefined) source = hasBody(requestHeaders) ? incoming : null;
    else if (input.raw?.body) source = Readable.fromWeb(input.raw.body as import('node:stream/web').ReadableStream);
    if (source === null) delete headers['content-length'];
    const body = source === null ? null : new ReplayableBody(source, IDEMPOTENT.has(method) ? REPLAY_BUFFER_BYTES : 0);
    const call: Call = { input, upstream, target, method, requestHeaders, headers, body, report, handedOff: false };
    upstream.inFlight++;
    try {
      return await forward(call);
    } finally {
      if (!call.handedOff) upstream.inFlight--;
    }
  };

  const hooks = deps.hooks;
  if (hooks === undefined) return (input) => handle(input, { node: null, status: 0 });
  return async (input) => {
    const started = performance.now();
    const report: Report = { node: null, status: 0 };
    try {
      const response = await handle(input, report);
      if (report.upstream !== undefined) hooks.proxyRequest(report.upstream, report.node, report.status || response.status, performance.now() - started);
      return response;
    } catch (error) {
      if (report.upstream !== undefined) hooks.proxyError(report.upstream, error, performance.now() - started);
      throw error;
    }
  };
}

/** Body errors raised by undici for the node's side: reset or closed socket, body timeout, short body, bad framing. */
const NODE_BODY_ERRORS = new Set(['UND_ERR_SOCKET', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'ECONNRESET']);

function isNodeBodyError(error: { code?: string }): boolean {
  return error.code !== undefined && (NODE_BODY_ERRORS.has(error.code) || error.code.startsWith('HPE_')); // HPE_*: llhttp parse errors
}

function rawTarget(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  return start === -1 ? '/' : url.slice(start);
}

function staleKey(call: Call): string {
  return call.target.path;
}
