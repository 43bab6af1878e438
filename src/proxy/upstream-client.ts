import type { Readable } from 'node:stream';
import type { Socket } from 'node:net';
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { skipInterimResponses } from './interim-responses.js';

/** One request to one configured node; `origin` and `path` are always sent separately. */
export interface UpstreamRequest {
  readonly origin: string;
  /** Starts with '/', query included. */
  readonly path: string;
  readonly method: string;
  readonly headers: Record<string, string | string[]>;
  readonly body: Readable | null;
  readonly signal: AbortSignal;
  /** Longest silence allowed between response body chunks. */
  readonly bodyTimeoutMs: number;
}

/** The upstream's answer; the caller must consume or destroy `body`. */
export interface UpstreamResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Readable;
}

/** One forwarded request; how it ends is told to the handler. */
export type UpstreamDispatch = Omit<UpstreamRequest, 'signal'>;

/**
 * undici's dispatch handler (undici 7's `onRequestStart`, `onResponseStart`, `onResponseData`,
 * `onResponseEnd`, `onResponseError`): the proxy forwards through it with no promise, stream
 * or AbortSignal per response (issue 12). The controller aborts, pauses and resumes.
 */
export type DispatchHandler = Dispatcher.DispatchHandler;

/** How the proxy talks to nodes; tests may pass their own. */
export interface UpstreamClient {
  /** For health checks: a promise of the head, the body as a stream. */
  request(request: UpstreamRequest): Promise<UpstreamResponse>;
  /** For forwarding: every event of the exchange goes to `handler`. */
  dispatch(request: UpstreamDispatch, handler: DispatchHandler): void;
  close(): Promise<void>;
}

/** Errors raised before a single byte of the request left this process. */
const NOTHING_SENT = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);

/** True when the error proves the node never saw the request, so any method may move on. */
export function isNothingSent(error: unknown): boolean {
  for (
    let e = error as { code?: unknown; cause?: unknown } | undefined, depth = 0;
    e && depth < 4;
    e = e.cause as typeof e, depth++
  ) {
    if (typeof e.code === 'string' && NOTHING_SENT.has(e.code)) return true;
    const nested = (e as { errors?: unknown[] }).errors; // AggregateError from happy-eyeballs connects
    if (Array.isArray(nested) && nested.length > 0 && nested.every(isNothingSent)) return true;
  }
  return false;
}

export interface UndiciClientOptions {
  /** Idle keep-alive sockets are closed after this long. */
  readonly keepAliveTimeoutMs?: number;
  readonly connectTimeoutMs?: number;
}

/** The production client: one undici Agent, which keeps a keep-alive pool per node origin. */
export function createUndiciClient(options: UndiciClientOptions = {}): UpstreamClient {
  const connect = buildConnector({ timeout: options.connectTimeoutMs ?? 10_000 }); // 10 s; the per-attempt timer usually fires first
  const agent = new Agent({
    keepAliveTimeout: options.keepAliveTimeoutMs ?? 4_000, // 4 s, under Node's 5 s server default
    connect: (opts, callback) =>
      connect(opts, (error, socket) => {
        if (socket) skipInterimResponses(socket as Socket);
        (callback as (e: Error | null, s: Socket | null) => void)(error, socket);
      }),
  });
  return {
    async request(r) {
      const res = await agent.request({
        origin: r.origin,
        path: r.path,
        method: r.method as Dispatcher.HttpMethod,
        headers: r.headers,
        body: r.body,
        signal: r.signal,
        headersTimeout: 0, // the caller's per-attempt timer covers connect + headers
        bodyTimeout: r.bodyTimeoutMs,
      });
      return { status: res.statusCode, headers: res.headers, body: res.body };
    },
    dispatch(r, handler) {
      agent.dispatch(
        {
          origin: r.origin,
          path: r.path,
          method: r.method as Dispatcher.HttpMethod,
          headers: r.headers,
          body: r.body,
          headersTimeout: 0, // the caller's per-attempt timer covers connect + headers
          bodyTimeout: r.bodyTimeoutMs,
        },
        handler,
      );
    },
    close: () => agent.close(),
  };
}
