import type { TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import type { BreakerService, Clock } from '../service/breaker-service.js';
import type { FlightResult } from './coalesce.js';
import { failover, httpTransport, IDEMPOTENT, type Attempt, type Ending, type FailoverDeps } from './failover.js';
import { fallbackResponse } from './fallback.js';
import { hasRequestBody, upstreamRequestHeaders, type HeaderRecord, type UpstreamClient } from './upstream-client.js';
import { sendCoalesced, sendFallback, staleKey, streamAnswer, type AnswerDeps } from './http-answer.js';
import {
  admitTarget,
  coalescingKey,
  ProxyCall,
  takeSlot,
  waitForSlot,
  reported,
  type CallParts,
  type ProxyHooks,
  type ProxyInput,
  type Report,
} from './proxy-call.js';
import {
  FORWARDED_METHODS,
  methodNotForwarded,
  noNodeAvailable,
  requestBodyTimeout,
  upstreamTimeout,
  upstreamUnreachable,
} from './proxy-errors.js';
import { ReplayableBody } from './replayable-body.js';
import type { Upstream } from './upstreams.js';
import type { PanicWatches } from './node-picker.js';

export { FORWARDED_METHODS } from './proxy-errors.js';
export type { ProxyInput } from './proxy-call.js';

const REPLAY_BUFFER_BYTES = 1024 * 1024; // 1 MiB of request body kept for a retry

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
  /** The upstreams' panic state, shared with the WebSocket path (node-picker.ts); absent: never in panic. */
  readonly panics?: PanicWatches;
}

export type ProxyHandler = (input: ProxyInput) => Promise<Response>;

/**
 * The `/proxy/:upstream/*` handler: admit (method, target, coalescing, bulkhead), then the
 * failover core picks nodes and tries them, and the ending becomes the caller's answer: the
 * node's streamed answer, a fallback, or a problem.
 */
export function createProxyHandler(deps: ProxyHandlerDeps): ProxyHandler {
  const proxy = new HttpProxy(deps);
  const hooks = deps.hooks;
  if (hooks === undefined) return (input) => proxy.handle(input, true, null);
  return (input) => reported(hooks, (r) => proxy.handle(input, true, r), statusOf);
}

const statusOf = (response: Response): number => response.status;

class HttpProxy {
  private readonly core: FailoverDeps;
  private readonly answerDeps: AnswerDeps;

  constructor(private readonly deps: ProxyHandlerDeps) {
    this.core = { breaker: deps.breaker, clock: deps.clock, failOpen: deps.failOpen ?? true, panics: deps.panics };
    this.answerDeps = { ...this.core, logger: deps.logger };
  }

  async handle(input: ProxyInput, coalesce: boolean, r: Report | null): Promise<Response> {
    if (!FORWARDED_METHODS.includes(input.method)) throw methodNotForwarded(input.method);
    // The raw target, before URL normalisation resolves dot segments we must refuse.
    const { target, upstream } = admitTarget(this.deps.upstreams, input.incoming.url ?? '/');
    if (r !== null) r.upstream = upstream.name;
    const requestHeaders: HeaderRecord = input.incoming.headers;
    const key = coalesce ? coalescingKey(upstream, input.method, target.path, requestHeaders) : null;
    const inFlight = key === null ? undefined : upstream.coalescer!.find(key);
    const waiting = inFlight?.join(requestHeaders) ?? null;
    if (waiting !== null) return this.follow(input, upstream, waiting, r); // a follower holds no bulkhead slot: it makes no call
    const source = hasRequestBody(requestHeaders) ? input.incoming : null;
    const headers = this.forwardedHeaders(input, requestHeaders, source !== null);
    const slot = takeSlot(upstream) ?? (await waitForSlot(upstream, input.outgoing));
    if (slot === null) return new Response(null, { status: 499 }); // the caller left while waiting for a slot
    const flight = key !== null && inFlight === undefined ? upstream.coalescer!.start(key, requestHeaders) : null;
    const limit = IDEMPOTENT.has(input.method) ? REPLAY_BUFFER_BYTES : 0;
    const body = source === null ? null : new ReplayableBody(source, limit, upstream.config.client_body_timeout_ms);
    const parts: CallParts = {
      input,
      upstream,
      target,
      method: input.method,
      requestHeaders,
      headers,
      body,
      flight,
      report: r,
    };
    const call = new ProxyCall(parts, slot, this.core);
    try {
      return this.answer(call, await failover(this.core, httpTransport(this.deps, call)));
    } catch (error) {
      if (error instanceof AppError) flight?.fail(error);
      else flight?.release();
      throw error;
    } finally {
      call.settle();
    }
  }

  /** The caller's answer for how the failover ended. */
  private answer(call: ProxyCall, ending: Ending<Attempt>): Response {
    const { upstream } = call.parts;
    call.observe(ending.kind === 'answer' || ending.kind === 'timeout' ? ending.kind : 'other');
    switch (ending.kind) {
      case 'answer':
        return streamAnswer(
          this.answerDeps,
          call,
          ending.node,
          ending.answer,
          !ending.recorded && ending.use.judged,
          ending.use,
          ending.outcome,
        ); // a failing or throttled answer goes back as sent, already counted
      case 'no_node':
        return this.fallbackOr(call, noNodeAvailable(upstream, ending.retryAt));
      case 'timeout':
        return this.fallbackOr(call, upstreamTimeout(upstream));
      case 'unreachable':
        return this.fallbackOr(call, upstreamUnreachable(upstream));
      case 'caller_gone':
        if (call.parts.body?.timedOut) {
          // The caller fell silent mid-upload: its fault, so no node outcome.
          call.parts.body.discard();
          throw requestBodyTimeout(upstream);
        }
        call.parts.flight?.release();
        return new Response(null, { status: 499 });
    }
  }

  private fallbackOr(call: ProxyCall, error: AppError): Response {
    const { upstream, method, requestHeaders, body, flight } = call.parts;
    body?.discard();
    const fallback = fallbackResponse(upstream, method, staleKey(call), requestHeaders, this.deps.clock());
    if (fallback === null) {
      flight?.fail(error);
      throw error;
    }
    const kind = fallback.headers['x-fallback'] as 'stale' | 'static';
    this.deps.hooks?.proxyFallback(upstream.name, kind);
    this.deps.logger.info(
      { event: 'fallback', upstream: upstream.name, kind, code: error.code, request_id: call.parts.input.requestId },
      error.message,
    );
    return sendFallback(call, fallback);
  }

  /** A follower: the leader's answer or problem, marked `X-Coalesced: true`; or its own call. */
  private async follow(
    input: ProxyInput,
    upstream: Upstream,
    waiting: Promise<FlightResult>,
    r: Report | null,
  ): Promise<Response> {
    const result = await waiting;
    if (result.kind === 'alone') return this.handle(input, false, r);
    if (result.kind === 'problem') throw result.error;
    this.deps.onCoalesced?.(upstream.name);
    return sendCoalesced(input, upstream, r, result.status, result.headers, result.body);
  }

  /** The fields sent to the node: end-to-end fields plus X-Forwarded-* and X-Request-Id; no Content-Length without a body. */
  private forwardedHeaders(
    input: ProxyInput,
    requestHeaders: HeaderRecord,
    hasBody: boolean,
  ): Record<string, string | string[]> {
    const { incoming, requestId } = input;
    const headers = upstreamRequestHeaders(requestHeaders, {
      requestId,
      clientIp: incoming.socket.remoteAddress,
      proto: (incoming.socket as TLSSocket).encrypted ? 'https' : 'http',
      localDc: this.deps.localDc,
    });
    if (!hasBody) delete headers['content-length'];
    return headers;
  }
}
