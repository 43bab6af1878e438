import type { Readable } from 'node:stream';
import type { Socket } from 'node:net';
import { Agent, buildConnector, type Dispatcher } from 'undici';

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

const HEAD_END = Buffer.from('\r\n\r\n');
const STATUS_LINE_BYTES = 12; // 'HTTP/1.1 100'

/**
 * Make a node's socket drop interim (1xx) responses before undici's parser sees them.
 *
 * RFC 9110 section 15.2: a client must accept 1xx responses it did not ask for, and skip
 * them. undici destroys the connection on a `100 Continue` it did not expect ('bad
 * response'), which turned a node that always sends one into a failing node. The proxy never
 * sends `Expect`, so every 1xx but `101 Switching Protocols` carries nothing for the caller.
 *
 * undici writes each request head as one latin1 string and runs one request per connection
 * at a time (pipelining 1), so the bytes read after a head is written start a response; only
 * those first bytes are inspected (two boolean checks per read or write otherwise).
 */
function skipInterimResponses(socket: Socket): void {
  let expectHead = false;
  let pending: Buffer | null = null;
  const write = socket.write;
  const read = socket.read;
  socket.write = function (this: Socket, chunk: unknown, ...rest: unknown[]) {
    // A request head, not a chunk-size line ('\r\n…') or body bytes (Buffers).
    if (typeof chunk === 'string' && chunk.charCodeAt(0) !== 13) expectHead = true;
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as Socket['write'];
  socket.read = function (this: Socket, size?: number) {
    const chunk = read.call(this, size) as Buffer | null;
    if (!expectHead || chunk === null) return chunk;
    let data = pending === null ? chunk : Buffer.concat([pending, chunk]);
    pending = null;
    for (;;) {
      if (data.length < STATUS_LINE_BYTES) {
        pending = data;
        return null; // the next 'readable' brings the rest of the status line
      }
      if (!isInterimStatusLine(data)) {
        expectHead = false;
        return data;
      }
      const end = data.indexOf(HEAD_END);
      if (end === -1) {
        pending = data;
        return null;
      }
      data = data.subarray(end + HEAD_END.length);
      if (data.length === 0) return null;
    }
  } as Socket['read'];
}

/** `HTTP/1.x 1xx` other than 101 (which starts a tunnel and is undici's to handle). */
function isInterimStatusLine(data: Buffer): boolean {
  return (
    data[0] === 0x48 && // 'H'
    data.toString('latin1', 0, 7) === 'HTTP/1.' &&
    data[9] === 0x31 && // '1'
    data.toString('latin1', 9, 12) !== '101'
  );
}
