import type { TLSSocket } from 'node:tls';
import { Readable } from 'node:stream';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import type { BreakerService, Clock } from '../service/breaker-service.js';
import { fallbackResponse } from './fallback.js';
import type { ProxyHooks } from './proxy-hooks.js';
import { Attempt, DiscardSink, elapsedMs } from './attempt.js';
import { ForwardSink, type Call } from './forward-sink.js';
import type { FlightResult } from './coalesce.js';
import { hasRequestBody, primaryKey } from './cache-rules.js';
import { unknownUpstream } from './unknown-upstream.js';
import { downstreamFlatHeaders, flatToRecord, removeFlat, toWebHeaders, upstreamRequestHeaders, type FlatHeaders, type HeaderRecord } from './forward-headers.js';
import { ReplayableBody } from './replayable-body.js';
import { sendResponse } from './send-response.js';
import type { StaleCache, StaleCapture } from './stale-cache.js';
import { parseProxyTarget } from './target-path.js';
import type { UpstreamClient } from './upstream-client.js';
import { pickNode, type ProxyNode, type Upstream } from './upstreams.js';
import { recordRequestOutcome } from './node-outcomes.js';
import { PanicWatch, pickInPanic, type PanicListener } from './panic.js';
import { isPromise } from '../store/maybe-promise.js';

/** Methods the proxy forwards; TRACE and CONNECT are refused (RFC 9110 sections 9.3.6 and 9.3.8). */
export const FORWARDED_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'];
/** Methods that may be replayed on another node after reaching one (RFC 9110 section 9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
const REPLAY_BUFFER_BYTES = 1024 * 1024; // 1 MiB of request body kept for a retry
const NO_BODY_STATUSES = new Set([204, 205, 304]);
/** No Content-Length on these (RFC 9110 section 8.6; nginx drops it too): they never have content. */
const NO_LENGTH_STATUSES = new Set([204, 304]);

export interface ProxyHandlerDeps {
  readonly upstreams: ReadonlyMap<string, Upstream>;
  readonly breaker: BreakerService;
  readonly client: UpstreamClient;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly localDc: string;
  /** On a storage outage, send to the local DC's nodes without their breakers (else 503 STORAGE_UNAVAILABLE). */
  readonly failOpen?: boolean;
  /** Called once per follower served from another request's call (for a metric). */
  readonly onCoalesced?: (upstream: string) => void;
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
  node: { readonly id: string; readonly dc: string; readonly local: boolean } | null;
  status: number;
}


/** The node for one attempt; `judged`: its outcome goes to its breaker (not so for a node used in panic against its breaker). */
type Choice = { readonly node: ProxyNode; readonly judged: boolean; readonly wouldRefuse?: boolean } | { readonly node: null; readonly retryAt: number | null };

type Outcome =
  | { readonly kind: 'answer'; readonly node: ProxyNode; readonly attempt: Attempt; readonly failed: boolean }
  | { readonly kind: 'timeout' | 'unreachable' | 'refused'; readonly node: ProxyNode; readonly startedAt: number }
  | { readonly kind: 'caller_gone' };

const CALLER_GONE = Object.assign(new Error('the caller hung up'), { code: 'CIRCUITLOG_CALLER_GONE' });

/** The `/proxy/:upstream/*` handler: pick a node, forward, fail over, fall back. */
export function createProxyHandler(deps: ProxyHandlerDeps): ProxyHandler {
  const { breaker, client, logger } = deps;
  const reports = new WeakMap<ProxyInput, Report>(); // only with hooks
  const panics = new Map<Upstream, PanicWatch>();
  const onPanic: PanicListener = (upstream, panic, available) => {
    const fields = { event: panic ? 'panic_entered' : 'panic_left', upstream: upstream.name, available, nodes: upstream.nodes.length, threshold_percent: upstream.config.panic_threshold_percent };
    logger.warn(fields, panic ? `${upstream.name}: panic: ${available} of ${upstream.nodes.length} nodes available; node breakers not honoured` : `${upstream.name}: panic over: ${available} of ${upstream.nodes.length} nodes available`);
    deps.hooks?.proxyPanic?.(upstream.name, panic);
  };
  for (const u of deps.upstreams.values()) if (u.config.panic_threshold_percent > 0) deps.hooks?.proxyPanic?.(u.name, false); // the gauge from the start

  function attempt(call: Call, node: ProxyNode, startedAt: number): Promise<Outcome> {
    const cfg = call.upstream.config;
    return new Promise((resolve) => {
      const settle = (a: Attempt) => {
        if (a.failure === null) {
          resolve({ kind: 'answer', node, attempt: a, failed: call.upstream.failureStatuses.has(a.status) });
          return;
        }
        call.current = null;
        if (call.body !== null) call.body.watcher = null;
        if (a.failure === 'caller_gone') return resolve({ kind: 'caller_gone' });
        logger.warn({ event: 'upstream_failed', upstream: call.upstream.name, node: node.id, kind: a.failure, err: a.error?.message }, `${node.circuit}: ${a.failure}`);
        resolve({ kind: a.failure, node, startedAt: a.startedAt });
      };
      const a = new Attempt(cfg.request_timeout_ms, settle, () => call.done || call.body?.sourceError != null, startedAt, deps.clock);
      call.current = a;
      if (call.body !== null) call.body.watcher = a; // the node's timer runs only while the upload waits on it
      client.dispatch(
        {
          origin: node.origin,
          path: node.basePath + call.target.path,
          method: call.method,
          headers: call.headers,
          body: call.body?.attempt() ?? null,
          bodyTimeoutMs: cfg.request_timeout_ms,
        },
        a,
      );
    });
  }

  async function forward(call: Call): Promise<Response> {
    const { upstream } = call;
    const watch = panicWatch(upstream);
    call.panic = watch.holds();
    let tried: Set<ProxyNode> | null = null;
    let budget = upstream.config.retries;
    let last: Outcome | null = null;
    for (;;) {
      const pick = await choose(call, watch, tried);
      if (pick.node === null) {
        if (last === null) return noNodeAvailable(call, pick.retryAt);
        return giveUp(call, last);
      }
      if (last?.kind === 'answer') last.attempt.attach(new DiscardSink(last.attempt));
      call.wouldRefuse = pick.wouldRefuse === true;
      const startedAt = deps.clock();
      const outcome = await attempt(call, pick.node, startedAt);
      if (outcome.kind === 'caller_gone') return call.body?.timedOut ? bodyTimedOut(call) : callerGone(call);
      if (outcome.kind === 'answer' && !outcome.failed) return answer(call, outcome.node, outcome.attempt, pick.judged);
      if (pick.judged) recordRequestOutcome(breaker, upstream, pick.node, false, elapsedMs(deps.clock, outcome.kind === 'answer' ? outcome.attempt.startedAt : outcome.startedAt));
      (tried ??= new Set()).add(pick.node);
      last = outcome;
      const replayable = call.body === null || call.body.replayable;
      if (outcome.kind === 'refused' && replayable) continue; // nothing was sent: free to move on
      if (!IDEMPOTENT.has(call.method) || budget === 0 || !replayable) return giveUp(call, last);
      budget--;
    }
  }

  /**
   * The node for the next attempt: by the breakers, or in panic over every node (panic.ts).
   * A pick that finds no node reads the nodes again at once, so the request that finds every
   * node out is the first one served in panic.
   */
  async function choose(call: Call, watch: PanicWatch, tried: ReadonlySet<ProxyNode> | null): Promise<Choice> {
    const { upstream } = call;
    if (call.panic) {
      const picked = pickInPanic(upstream, breaker, tried);
      const pick = isPromise(picked) ? await picked : picked;
      return pick ?? { node: null, retryAt: null };
    }
    const picked = pickNode(upstream, breaker, tried, deps.failOpen ?? true);
    const pick = isPromise(picked) ? await picked : picked;
    if (pick.node !== null) return { node: pick.node, judged: true, wouldRefuse: pick.wouldRefuse };
    watch.stale();
    if (!watch.holds()) return pick;
    call.panic = true;
    return choose(call, watch, tried);
  }

  function panicWatch(upstream: Upstream): PanicWatch {
    let watch = panics.get(upstream);
    if (watch === undefined) panics.set(upstream, (watch = new PanicWatch(upstream, breaker, deps.clock, onPanic)));
    return watch;
  }

  function giveUp(call: Call, last: Outcome): Response {
    switch (last.kind) {
      case 'answer':
        return answer(call, last.node, last.attempt, false); // an upstream 5xx goes back as sent
      case 'timeout':
        return fallbackOr(call, new AppError('UPSTREAM_TIMEOUT', `No node of '${call.upstream.name}' answered within ${call.upstream.config.request_timeout_ms} ms.`));
      case 'refused':
      case 'unreachable':
        return fallbackOr(call, new AppError('UPSTREAM_UNREACHABLE', `No node of '${call.upstream.name}' could be reached.`));
      case 'caller_gone':
        return callerGone(call);
    }
  }

  /** The caller fell silent mid-upload: its fault, so no node outcome; nginx's 408, and the connection closes. */
  function bodyTimedOut(call: Call): never {
    call.body?.discard();
    throw new AppError('REQUEST_BODY_TIMEOUT', `The request body stopped arriving for ${call.upstream.config.client_body_timeout_ms} ms; nothing was counted against '${call.upstream.name}'.`, {
      headers: { connection: 'close' },
    });
  }

  function callerGone(call: Call): Response {
    call.flight?.release();
    return new Response(null, { status: 499 });
  }

  function noNodeAvailable(call: Call, retryAt: number | null): Response {
    const detail = `Every node of '${call.upstream.name}' has an open circuit; no node was contacted.`;
    return fallbackOr(call, new AppError('NO_NODE_AVAILABLE', detail, retryAt === null ? { retryAfterSeconds: 1 } : { retryAt }));
  }

  function fallbackOr(call: Call, error: AppError): Response {
    call.body?.discard();
    const fallback = fallbackResponse(call.upstream, call.method, staleKey(call), call.requestHeaders, deps.clock());
    if (fallback === null) {
      call.flight?.fail(error);
      throw error;
    }
    call.flight?.answer(fallback.status, recordToFlat(fallback.headers), fallback.body);
    deps.hooks?.proxyFallback(call.upstream.name, fallback.headers['x-fallback'] as 'stale' | 'static');
    report(call.input, null, fallback.status);
    logger.info({ event: 'fallback', upstream: call.upstream.name, kind: fallback.headers['x-fallback'], code: error.code }, error.message);
    const outgoing = call.detached ? undefined : call.input.outgoing;
    return sendResponse(outgoing, fallback.status, fallback.headers, call.method === 'HEAD' ? null : fallback.body);
  }

  /**
   * Pass a node's answer on; with `judge`, its outcome goes to the node's circuit once the
   * body has ended: a reset or a silence over request_timeout_ms inside the body is a node
   * failure, even though the head was already passed on. A body cut by the caller leaving
   * says nothing against the node.
   */
  function answer(call: Call, node: ProxyNode, attempt: Attempt, judge: boolean): Response {
    const status = attempt.status;
    const headers = downstreamFlatHeaders(attempt.rawHeaders);
    if (NO_LENGTH_STATUSES.has(status)) removeFlat(headers, 'content-length');
    if (call.wouldRefuse) headers.push('x-circuit-would-refuse', 'true');
    headers.push('x-node', node.id, 'x-dc', node.dc, 'x-degraded', call.panic ? 'panic' : node.local ? 'false' : 'true');
    report(call.input, node, status);
    const noBody = call.method === 'HEAD' || NO_BODY_STATUSES.has(status);
    const stale = call.upstream.stale;
    const keep = stale !== null && call.method === 'GET' && status === 200 ? staleCapture(call, stale, headers) : null;
    call.handedOff = true;
    const flight = call.flight !== null && call.flight.head(status, headers.slice(), contentLength(headers)) ? call.flight : null;
    const sink = new ForwardSink(deps, call, node, judge, keep, flight, attempt.startedAt);
    const outgoing = call.input.outgoing;
    // An answer without content is complete with its head; whatever undici says of its body
    // afterwards (it calls a 304 with a Content-Length short) is no concern of the caller's.
    const feed = (target: ForwardSink) => (noBody ? (attempt.attach(new DiscardSink(attempt)), target.end()) : attempt.attach(target));
    if (outgoing !== undefined) {
      if (!call.detached) outgoing.writeHead(status, headers);
      sink.outgoing = outgoing;
      feed(sink);
      return RESPONSE_ALREADY_SENT;
    }
    const web = noBody ? null : new Readable({ read: () => sink.resume() });
    // A web reader that cancels (the caller left) stops the node's body as a hang-up would.
    web?.once('close', () => call.done || attempt.cancel('caller_gone', CALLER_GONE));
    sink.web = web;
    feed(sink);
    return new Response(web === null ? null : (Readable.toWeb(web) as ReadableStream<Uint8Array>), { status, headers: toWebHeaders(flatToRecord(headers)) });
  }

  function staleCapture(call: Call, stale: StaleCache, headers: FlatHeaders): StaleCapture | null {
    const record = flatToRecord(headers);
    if (!stale.mayStore(call.requestHeaders, 200, record)) return null;
    delete record['x-node'];
    delete record['x-dc'];
    delete record['x-degraded'];
    return stale.capture(staleKey(call), call.requestHeaders, 200, record, deps.clock);
  }

  /** A follower: the leader's answer or problem, marked `X-Coalesced: true`; or its own call. */
  async function follow(input: ProxyInput, upstream: Upstream, waiting: Promise<FlightResult>): Promise<Response> {
    const result = await waiting;
    if (result.kind === 'alone') return handle(input, false);
    if (result.kind === 'problem') throw result.error;
    deps.onCoalesced?.(upstream.name);
    report(input, nodeOfHeaders(result.headers), result.status);
    const headers = [...result.headers, 'x-coalesced', 'true'];
    const body = input.method === 'HEAD' || NO_BODY_STATUSES.has(result.status) ? null : result.body;
    const outgoing = input.outgoing;
    if (outgoing === undefined) return new Response(body === null ? null : new Uint8Array(body), { status: result.status, headers: toWebHeaders(flatToRecord(headers)) });
    if (!outgoing.destroyed) outgoing.writeHead(result.status, headers).end(body ?? undefined); // a follower that left is simply not answered
    return RESPONSE_ALREADY_SENT;
  }

  async function handle(input: ProxyInput, coalesce: boolean): Promise<Response> {
    const { incoming, method } = input;
    if (!FORWARDED_METHODS.includes(method)) {
      throw new AppError('METHOD_NOT_ALLOWED', `${method} is not forwarded.`, { headers: { allow: FORWARDED_METHODS.join(', ') } });
    }
    // The raw target, before URL normalisation resolves dot segments we must refuse.
    const target = parseProxyTarget(incoming?.url ?? rawTarget(input.url));
    const upstream = deps.upstreams.get(target.upstream);
    if (upstream === undefined) throw unknownUpstream(target.upstream, deps.upstreams);
    const r = reports.get(input);
    if (r !== undefined) r.upstream = upstream.name;
    const requestHeaders: HeaderRecord = incoming?.headers ?? Object.fromEntries(input.raw?.headers ?? []);
    const key = coalesce && upstream.coalescer !== null ? upstream.coalescer.keyOf(method, target.path, requestHeaders) : null;
    const inFlight = key === null ? undefined : upstream.coalescer!.find(key);
    if (inFlight !== undefined) {
      const waiting = inFlight.join(requestHeaders);
      if (waiting !== null) return follow(input, upstream, waiting); // a follower holds no bulkhead slot: it makes no call
    }
    const max = upstream.config.max_concurrent;
    if (max !== undefined && upstream.inFlight >= max) {
      throw new AppError('BULKHEAD_FULL', `'${upstream.name}' already has ${max} requests in flight.`, { retryAfterSeconds: 1 });
    }
    const headers = upstreamRequestHeaders(requestHeaders, {
      clientIp: incoming?.socket.remoteAddress,
      proto: incoming ? ((incoming.socket as TLSSocket).encrypted ? 'https' : 'http') : new URL(input.url).protocol.slice(0, -1),
      localDc: deps.localDc,
    });
    let source: Readable | null = null;
    if (incoming !== undefined) source = hasRequestBody(requestHeaders) ? incoming : null;
    else if (input.raw?.body) source = Readable.fromWeb(input.raw.body as import('node:stream/web').ReadableStream);
    if (source === null) delete headers['content-length'];
    const body = source === null ? null : new ReplayableBody(source, IDEMPOTENT.has(method) ? REPLAY_BUFFER_BYTES : 0, upstream.config.client_body_timeout_ms);
    const flight = key !== null && inFlight === undefined ? upstream.coalescer!.start(key, requestHeaders) : null;
    const call: Call = { input, upstream, target, method, requestHeaders, headers, body, current: null, handedOff: false, done: false, flight, detached: false };
    // A caller that hangs up cancels the attempt in progress: before the head, the node's
    // work and the bulkhead slot are freed at once; either way it says nothing against the
    // node. A leader with followers waiting is only detached: its call goes on for them.
    input.outgoing?.once('close', () => {
      if (call.done) return;
      if (call.flight !== null && call.flight.followers > 0 && !call.flight.settled) {
        call.detached = true;
        return;
      }
      call.done = true;
      call.current?.cancel('caller_gone', CALLER_GONE);
    });
    upstream.inFlight++;
    try {
      return await forward(call);
    } catch (error) {
      if (error instanceof AppError) call.flight?.fail(error);
      else call.flight?.release();
      throw error;
    } finally {
      if (!call.handedOff) upstream.inFlight--;
    }
  }

  function report(input: ProxyInput, node: Report['node'], status: number): void {
    const r = reports.get(input);
    if (r === undefined) return;
    r.node = node;
    r.status = status;
  }

  const hooks = deps.hooks;
  if (hooks === undefined) return (input) => handle(input, true);
  return async (input) => {
    const started = performance.now();
    const r: Report = { node: null, status: 0 };
    reports.set(input, r);
    try {
      const response = await handle(input, true);
      if (r.upstream !== undefined) hooks.proxyRequest(r.upstream, r.node, r.status || response.status, performance.now() - started);
      return response;
    } catch (error) {
      if (r.upstream !== undefined) hooks.proxyError(r.upstream, error, performance.now() - started);
      throw error;
    }
  };
}

/** The node named in a coalesced answer's X-Node / X-Dc / X-Degraded headers. */
function nodeOfHeaders(headers: FlatHeaders): Report['node'] {
  const get = (name: string) => {
    for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return headers[i + 1];
    return undefined;
  };
  const id = get('x-node');
  const dc = get('x-dc');
  return id === undefined || dc === undefined ? null : { id, dc, local: get('x-degraded') === 'false' };
}

function contentLength(headers: FlatHeaders): number {
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === 'content-length') return Number(headers[i + 1]);
  return 0;
}

function recordToFlat(record: Record<string, string | string[]>): FlatHeaders {
  const out: FlatHeaders = [];
  for (const name in record) {
    const value = record[name]!;
    if (Array.isArray(value)) for (const v of value) out.push(name, v);
    else out.push(name, value);
  }
  return out;
}

function rawTarget(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2);
  return start === -1 ? '/' : url.slice(start);
}

/** The stale cache's key: the coalescing one (Host, path and query); the Vary'd fields select the variant. */
function staleKey(call: Call): string {
  return primaryKey(call.requestHeaders, call.target.path);
}
