/** What goes to a node and comes back: the client that sends it (undici), and the header fields on both ways. */
import type { Readable } from 'node:stream';
import type { Socket } from 'node:net';
import { Agent, buildConnector, type Dispatcher, util } from 'undici';
import { REQUEST_ID_HEADER } from '../request-id.js';

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

// Header handling at the proxy boundary, both ways, with the hop-by-hop list.

export type HeaderRecord = Record<string, string | string[] | undefined>;

/**
 * Hop-by-hop fields describe one connection and are never forwarded (RFC 9110 section 7.6.1,
 * https://www.rfc-editor.org/rfc/rfc9110#section-7.6.1; the same idea as hono's src/helper/proxy).
 */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authorization',
  'proxy-authenticate',
]);

/** Hop-by-hop fields of a node's 101 answer other than the two the switch needs (and the request-only one). */
export const NOT_RELAYED_ON_SWITCH: ReadonlySet<string> = new Set(
  [...HOP_BY_HOP].filter((n) => n !== 'connection' && n !== 'upgrade' && n !== 'proxy-authorization'),
);

/** Fields we set ourselves or that undici refuses (it sends `Host` from the node origin). */
const REQUEST_DROPPED = new Set([
  'host',
  'expect',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-dc',
]);

/** The options of the Connection values nearly every message carries, made once. */
const KEEP_ALIVE_ONLY: ReadonlySet<string> = new Set(['keep-alive']);
const CLOSE_ONLY: ReadonlySet<string> = new Set(['close']);

/** The field names a Connection header lists (RFC 9110 section 7.6.1), lower-case. */
function namedInConnection(connection: string | string[] | undefined): ReadonlySet<string> | null {
  if (connection === undefined) return null;
  if (typeof connection === 'string' && (connection.length === 10 || connection.length === 5)) {
    // One bare token, the common case: the same set as the split below, without building it.
    const token = connection.toLowerCase();
    if (token === 'keep-alive') return KEEP_ALIVE_ONLY;
    if (token === 'close') return CLOSE_ONLY;
  }
  const names = new Set<string>();
  for (const value of Array.isArray(connection) ? connection : [connection]) {
    for (const token of value.split(',')) names.add(token.trim().toLowerCase());
  }
  return names;
}

/** Copy end-to-end fields of `source` (lower-case names) into a new record. */
function endToEnd(source: HeaderRecord, alsoDrop: ReadonlySet<string> | null): Record<string, string | string[]> {
  const dropped = namedInConnection(source.connection);
  const out: Record<string, string | string[]> = {};
  for (const name in source) {
    const value = source[name];
    if (value === undefined || HOP_BY_HOP.has(name) || alsoDrop?.has(name) || dropped?.has(name)) continue;
    out[name] = value;
  }
  return out;
}

export interface ForwardedFrom {
  /** The request's id (request-id.ts): the node gets it in X-Request-Id, the caller's own replaced. */
  readonly requestId: string;
  /** The peer's address, when known. */
  readonly clientIp: string | undefined;
  readonly proto: string;
  readonly localDc: string;
}

/** Request fields for the node: end-to-end ones plus the X-Forwarded-* set. */
export function upstreamRequestHeaders(incoming: HeaderRecord, from: ForwardedFrom): Record<string, string | string[]> {
  const out = endToEnd(incoming, REQUEST_DROPPED);
  const prior = incoming['x-forwarded-for'];
  const chain = Array.isArray(prior) ? prior.join(', ') : prior;
  if (from.clientIp !== undefined) out['x-forwarded-for'] = chain ? `${chain}, ${from.clientIp}` : from.clientIp;
  else if (chain) out['x-forwarded-for'] = chain;
  out['x-forwarded-proto'] = from.proto;
  const host = incoming.host;
  if (typeof host === 'string') out['x-forwarded-host'] = host;
  out['x-forwarded-dc'] = from.localDc;
  out[REQUEST_ID_HEADER] = from.requestId;
  return out;
}

/** A flat `[name, value, name, value, …]` list, as `writeHead` takes it (names lower-case). */
export type FlatHeaders = string[];

/**
 * Response fields for the caller from undici's raw list (Buffers, names in any case), as a
 * flat list: `writeHead` stores it without building an object (issue 12). Names go through
 * undici's `headerNameToString`: a well-known name comes back lower-case from its table,
 * without a string made and lower-cased per field.
 */
export function downstreamFlatHeaders(raw: readonly Buffer[]): FlatHeaders {
  const out: FlatHeaders = [];
  let connection: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    const name = util.headerNameToString(raw[i]!);
    const value = raw[i + 1]!.toString('latin1');
    if (HOP_BY_HOP.has(name)) {
      if (name === 'connection') connection = connection === null ? value : `${connection}, ${value}`;
      continue;
    }
    out.push(name, value);
  }
  const named = namedInConnection(connection ?? undefined);
  if (named === null || (named.size === 1 && (named.has('keep-alive') || named.has('close')))) return out;
  return out.filter((_, i) => !named.has(out[i - (i % 2)]!));
}

/** The caller's request id on an answer's flat list, in place of any the node sent (it echoes ours, or has its own). */
export function setRequestId(headers: FlatHeaders, requestId: string): FlatHeaders {
  removeFlat(headers, REQUEST_ID_HEADER).push(REQUEST_ID_HEADER, requestId);
  return headers;
}

/** Drop every field called `name` from a flat list. */
export function removeFlat(headers: FlatHeaders, name: string): FlatHeaders {
  for (let i = headers.length - 2; i >= 0; i -= 2) if (headers[i] === name) headers.splice(i, 2);
  return headers;
}

/** A record (repeated fields as arrays) from a flat list. */
export function flatToRecord(headers: FlatHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const prior = out[name];
    out[name] =
      prior === undefined
        ? headers[i + 1]!
        : Array.isArray(prior)
          ? [...prior, headers[i + 1]!]
          : [prior, headers[i + 1]!];
  }
  return out;
}

/** True when the request carries a body (a GET with a body asks something its URL does not say). */
export function hasRequestBody(headers: HeaderRecord): boolean {
  const length = headers['content-length'];
  return (length !== undefined && length !== '0') || headers['transfer-encoding'] !== undefined;
}
