/**
 * The Transport over HTTP, with undici (which the service already ships) and keep-alive;
 * circuitlog's answers read leniently: a field missing or of the wrong type takes a safe
 * default, an unusable event is skipped (an older or newer server, or a proxy in between).
 */

import { Client, Pool } from 'undici';
import type { CircuitState } from '../domain/circuit.js';
import { SSE_LIMITS, SseLimitError, SseParser, type SseLimits } from './sse.js';
import { type AuthHeaders, authHeaders } from './token-source.js';
import {
  TransportError,
  type AllowedAnswer,
  type CircuitJson,
  type OpenStream,
  type OutcomeItem,
  type StreamReset,
  type Transport,
  type TransitionEvent,
  type WhoamiAnswer,
} from './transport.js';

export interface HttpTransportOptions {
  /** circuitlog's base URL, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  readonly url: string;
  readonly token?: string;
  /** The `Authorization` header of each request (a token provider or file, token-source.ts); wins over `token`. */
  readonly auth?: AuthHeaders;
  /** Deadline of one request: from sending it to the last byte of its answer (not an idle timeout). */
  readonly requestTimeoutMs: number;
  /** Largest answer body read; a longer one fails the request (default 1 MiB). */
  readonly maxResponseBytes?: number;
  /** Bounds of the event stream's lines and events; past them it is dropped and reopened. */
  readonly streamLimits?: SseLimits;
  /** A stream silent for this long is dead (the server sends a heartbeat every 15 s). */
  readonly streamIdleTimeoutMs: number;
  readonly connections: number;
}

type Headers = Record<string, string>;
type Body = AsyncIterable<Uint8Array> & { destroy(error?: Error): void };
type Response = { statusCode: number; headers: Record<string, string | string[] | undefined>; body: Body };
/** An answer read whole, within its deadline and size bound; `json` is null for an empty or non-JSON body. */
type Answer = { statusCode: number; headers: Response['headers']; json: unknown };

export const MAX_RESPONSE_BYTES = 1024 * 1024; // 1 MiB: a circuit's JSON is about 1 KiB

/** undici's and Node's codes for a socket the other side closed (a kept-alive connection it dropped). */
const SOCKET_CLOSED = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

export function createHttpTransport(options: HttpTransportOptions): Transport {
  return new HttpTransport(options);
}

class HttpTransport implements Transport {
  private readonly prefix: string;
  private readonly pool: Pool;
  /**
   * Batches of outcomes go on one connection of their own, pipelined two deep: circuitlog
   * reads them in the order sent, and starts on the next while answering the previous.
   */
  private readonly outcomes: Client;
  private readonly auth: AuthHeaders;
  private readonly streams = new Set<AbortController>();
  private readonly maxBytes: number;
  /** undici's own timers are idle timeouts (each byte restarts them); the deadline is ours. */
  private readonly timeouts: { headersTimeout: number; bodyTimeout: number };

  constructor(private readonly options: HttpTransportOptions) {
    const base = new URL(options.url);
    this.prefix = base.pathname.replace(/\/+$/, '');
    this.pool = new Pool(base.origin, { connections: options.connections });
    this.outcomes = new Client(base.origin, { pipelining: 2 });
    this.auth = options.auth ?? authHeaders(options.token || undefined, undefined);
    this.maxBytes = options.maxResponseBytes ?? MAX_RESPONSE_BYTES;
    this.timeouts = { headersTimeout: options.requestTimeoutMs, bodyTimeout: options.requestTimeoutMs };
  }

  async allowed(name: string, caller?: string): Promise<AllowedAnswer> {
    const path = `/circuits/${encodeURIComponent(name)}/allowed${caller === undefined ? '' : `?caller=${encodeURIComponent(caller)}`}`;
    // A GET is safe to repeat: once more when a kept-alive socket was closed under us,
    // within what is left of the same deadline.
    const deadlineAt = Date.now() + this.options.requestTimeoutMs;
    const res = await this.send('GET', path, {}).catch((error: TransportError) => {
      if (SOCKET_CLOSED.has((error.cause as { code?: string } | undefined)?.code ?? ''))
        return this.send('GET', path, {}, undefined, deadlineAt - Date.now());
      throw error;
    });
    const body = res.json;
    if (res.statusCode === 200) return allowedAnswer(body);
    if (res.statusCode === 503 && isOpenProblem(body)) return refusal(body, res.headers);
    throw failure(res.statusCode, body);
  }

  async whoami(): Promise<WhoamiAnswer | null> {
    const res = await this.send('GET', '/whoami', {});
    if (res.statusCode === 404) return null; // a server from before /whoami
    const body = res.json as { id?: unknown; callers?: unknown } | null;
    if (res.statusCode !== 200 || typeof body?.id !== 'string') throw failure(res.statusCode, res.json);
    const callers = Array.isArray(body.callers) ? body.callers.filter((c): c is string => typeof c === 'string') : null;
    return { id: body.id, callers };
  }

  async circuit(name: string): Promise<CircuitJson | null> {
    const res = await this.send('GET', `/circuits/${encodeURIComponent(name)}`, {});
    const body = res.json;
    if (res.statusCode === 200 && typeof body === 'object' && body !== null) return body as Record<string, unknown>;
    if (res.statusCode === 404) return null;
    throw failure(res.statusCode, body);
  }

  async postOutcomes(items: readonly OutcomeItem[], source?: string): Promise<void> {
    const res = await this.exchange(this.outcomes, {
      method: 'POST',
      path: `${this.prefix}/outcomes`,
      // The per-item states are not used: a 204 (RFC 7240) saves writing and reading them.
      headers: { ...(await this.auth()), 'content-type': 'application/json', prefer: 'return=minimal' },
      body: JSON.stringify(source === undefined ? { outcomes: items } : { source, outcomes: items }),
      // Lets undici pipeline it; a batch is already sent again after a lost answer (at least once).
      idempotent: true,
    });
    if (res.statusCode !== 204 && res.statusCode !== 200) throw failure(res.statusCode, res.json); // 200: a server before the preference
  }

  async openStream(
    lastEventId: string | undefined,
    onEvent: (event: TransitionEvent) => void,
    onReset?: (reset: StreamReset) => void,
  ): Promise<OpenStream> {
    const controller = new AbortController();
    const body = await this.openStreamHead(lastEventId, controller);
    this.streams.add(controller);
    const parser = new SseParser((message) => {
      if (message.event === 'reset') {
        const reset = parseReset(message.data);
        if (reset !== null) onReset?.(reset);
        return;
      }
      if (message.event !== 'transition' || message.id === undefined) return;
      const event = parseTransition(message.data, message.id);
      if (event !== null) onEvent(event);
    }, this.options.streamLimits ?? SSE_LIMITS);
    const ended = (async () => {
      try {
        for await (const chunk of body) parser.push(chunk);
      } catch (error) {
        // aborted, reset, idle past streamIdleTimeoutMs, or past a size limit (SseLimitError):
        // the stream has ended either way, and the keeper opens it again.
        if (error instanceof SseLimitError) body.destroy(error);
      } finally {
        this.streams.delete(controller);
      }
    })();
    return { ended, close: () => controller.abort() };
  }

  async close(): Promise<void> {
    for (const controller of this.streams) controller.abort();
    await Promise.all([this.pool.close(), this.outcomes.close()]);
  }

  /** The stream's answer head, once it is a 200; a refusal throws, `rejected` when circuitlog sent a problem. */
  private async openStreamHead(lastEventId: string | undefined, controller: AbortController): Promise<Body> {
    const { requestTimeoutMs, streamIdleTimeoutMs } = this.options;
    const headers: Headers = { ...(await this.auth()), accept: 'text/event-stream' };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    // Opening (up to the answer's head, or a refusal's whole body) has the request deadline;
    // once open, the stream has the idle timeout only (heartbeats every 15 s).
    const opening = setTimeout(() => controller.abort(new Error('deadline')), requestTimeoutMs);
    try {
      const res = (await this.pool.request({
        method: 'GET',
        path: `${this.prefix}/events/stream`,
        headers,
        signal: controller.signal,
        headersTimeout: requestTimeoutMs,
        bodyTimeout: streamIdleTimeoutMs,
      })) as unknown as Response;
      if (res.statusCode === 200) return res.body;
      // A problem document means circuitlog is up and refused the stream (too many open, bad
      // token): the client keeps asking it per call rather than going offline.
      const problem = await readJson(res.body, this.maxBytes);
      if (isProblem(problem))
        throw new TransportError('rejected', `stream refused: ${res.statusCode}`, res.statusCode, problem);
      throw failure(res.statusCode, problem);
    } catch (error) {
      throw error instanceof TransportError ? error : unreachable(error);
    } finally {
      clearTimeout(opening);
    }
  }

  /** One request and its whole answer, within `requestTimeoutMs` in total. */
  private async exchange(
    dispatcher: Pool | Client,
    request: Record<string, unknown>,
    timeoutMs = this.options.requestTimeoutMs,
  ): Promise<Answer> {
    const deadline = AbortSignal.timeout(Math.max(1, timeoutMs));
    try {
      const res = (await dispatcher.request({ ...request, signal: deadline, ...this.timeouts } as Parameters<
        Pool['request']
      >[0])) as unknown as Response;
      return { statusCode: res.statusCode, headers: res.headers, json: await readJson(res.body, this.maxBytes) };
    } catch (error) {
      if (deadline.aborted) {
        throw new TransportError(
          'unreachable',
          `circuitlog unreachable (no whole answer within ${this.options.requestTimeoutMs} ms)`,
          undefined,
          undefined,
          { cause: error },
        );
      }
      throw error instanceof TransportError ? error : unreachable(error);
    }
  }

  private async send(
    method: 'GET' | 'POST',
    path: string,
    headers: Headers,
    body?: string,
    timeoutMs?: number,
  ): Promise<Answer> {
    return this.exchange(
      this.pool,
      { method, path: this.prefix + path, headers: { ...(await this.auth()), ...headers }, body },
      timeoutMs,
    );
  }
}

/**
 * The body as JSON, reading at most `maxBytes` (a longer body fails the request as
 * unreachable: it is not a circuitlog answer). Null for an empty or non-JSON body.
 */
async function readJson(body: Body, maxBytes: number): Promise<unknown> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      const error = new TransportError('unreachable', `circuitlog's answer is over ${maxBytes} bytes`);
      body.destroy(error);
      throw error;
    }
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return null; // an empty or non-JSON body: the status says enough
  }
}

function unreachable(error: unknown): TransportError {
  const code = (error as { code?: string }).code;
  return new TransportError('unreachable', `circuitlog unreachable${code ? ` (${code})` : ''}`, undefined, undefined, {
    cause: error,
  });
}

function failure(status: number, problem: unknown): TransportError {
  const kind = status >= 500 ? 'unreachable' : 'rejected';
  return new TransportError(kind, `circuitlog answered ${status}`, status, problem);
}

const STATES: readonly string[] = ['closed', 'open', 'half_open'];

/**
 * The longest a refusal is believed: `Retry-After` and `open_until` past it are cut to it (1 day),
 * so a hostile or broken answer cannot make a retry time no `Date` can hold (a RangeError in the
 * fallback path), and the circuit is asked again within a day at the latest.
 */
const MAX_RETRY_MS = 24 * 60 * 60 * 1000; // 1 day

function isProblem(body: unknown): boolean {
  return typeof (body as { code?: unknown } | null)?.code === 'string';
}

function isOpenProblem(body: unknown): body is Record<string, unknown> {
  const code = (body as { code?: unknown } | null)?.code;
  return (
    code === 'CIRCUIT_OPEN' ||
    code === 'CIRCUIT_FORCED_OPEN' ||
    code === 'CIRCUIT_THROTTLED' ||
    code === 'DEPENDENCY_THROTTLED' ||
    code === 'CIRCUIT_RAMPING'
  );
}

function stateOf(value: unknown, fallback: CircuitState): CircuitState {
  return typeof value === 'string' && STATES.includes(value) ? (value as CircuitState) : fallback;
}

function allowedAnswer(body: unknown): AllowedAnswer {
  const b = (body ?? {}) as Record<string, unknown>;
  const circuit = typeof b.circuit === 'object' && b.circuit !== null ? (b.circuit as Record<string, unknown>) : null;
  return { allowed: true, state: stateOf(b.state, 'closed'), circuit };
}

function refusal(
  body: Record<string, unknown>,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): AllowedAnswer {
  const forced = body.code === 'CIRCUIT_FORCED_OPEN';
  const state = stateOf(body.state, 'open');
  const now = Date.now();
  const openUntil = Math.min(
    typeof body.open_until === 'string' ? Date.parse(body.open_until) : NaN,
    now + MAX_RETRY_MS,
  );
  const retryAfterSeconds = Number(headers['retry-after']);
  const retryAfterMs = Math.min(
    (Number.isFinite(retryAfterSeconds) && retryAfterSeconds >= 0 ? retryAfterSeconds : 1) * 1000,
    MAX_RETRY_MS,
  );
  const retryAt = !forced && state === 'open' && Number.isFinite(openUntil) ? openUntil : now + retryAfterMs;
  if (body.code === 'CIRCUIT_THROTTLED') {
    const p = body.throttle_probability;
    return {
      allowed: false,
      state: 'closed',
      retryAt,
      retryAfterMs,
      forced: false,
      throttled: { probability: typeof p === 'number' && p >= 0 && p < 1 ? p : 0 },
    };
  }
  const issue29 = coolOrRamp(body, state, now, retryAfterMs);
  if (issue29 !== null) return issue29;
  // A caller's isolation has its own open_until, whatever the circuit's state.
  if (body.scope === 'caller' && Number.isFinite(openUntil))
    return { allowed: false, state, retryAt: openUntil, retryAfterMs, forced, scope: 'caller' };
  return { allowed: false, state, retryAt, retryAfterMs, forced };
}

/** A `dependency-throttled` or `circuit-ramping` answer (issue 29), else null. */
function coolOrRamp(
  body: Record<string, unknown>,
  state: CircuitState,
  now: number,
  retryAfterMs: number,
): AllowedAnswer | null {
  if (body.code === 'DEPENDENCY_THROTTLED') {
    // Kept until cool_until, by this host's clock at most Retry-After from now (hosts' clocks differ).
    const until = Math.min(isoMs(body.cool_until) ?? Infinity, now + retryAfterMs);
    const scope = body.scope === 'caller' ? 'caller' : 'circuit';
    return { allowed: false, state, retryAt: until, retryAfterMs, forced: false, coolDown: { until, scope } };
  }
  if (body.code === 'CIRCUIT_RAMPING') {
    const p = body.ramp_percent;
    const percent = typeof p === 'number' && p >= 0 && p <= 100 ? p : 0;
    const ramping = { percent, rampUntil: isoMs(body.ramp_until) };
    return { allowed: false, state: 'closed', retryAt: now + 1_000, retryAfterMs: 1_000, forced: false, ramping };
  }
  return null;
}

/** An ISO 8601 time as epoch ms, at most a day from now; null when absent or unreadable. */
function isoMs(value: unknown): number | null {
  const ms = typeof value === 'string' ? Date.parse(value) : Number.NaN;
  return Number.isFinite(ms) ? Math.min(ms, Date.now() + MAX_RETRY_MS) : null;
}

function parseReset(data: string): StreamReset | null {
  try {
    const d = JSON.parse(data) as Record<string, unknown>;
    const newestId = d.newest_id;
    // A number (SQLite's transition id) or, on Redis, a cursor of numbers joined by dots: opaque either way.
    const valid =
      typeof newestId === 'number'
        ? Number.isSafeInteger(newestId) && newestId >= 0
        : typeof newestId === 'string' && /^\d+(\.\d+)*$/.test(newestId);
    if (!valid) return null;
    return { reason: typeof d.reason === 'string' ? d.reason : 'unknown', newestId: String(newestId) };
  } catch {
    return null;
  }
}

function parseTransition(data: string, id: string): TransitionEvent | null {
  try {
    const d = JSON.parse(data) as Record<string, unknown>;
    if (typeof d.circuit !== 'string' || typeof d.to !== 'string') return null;
    return {
      id,
      circuit: d.circuit,
      from: stateOf(d.from, 'closed'),
      to: stateOf(d.to, 'closed'),
      reason: String(d.reason ?? ''),
      at: String(d.at ?? ''),
      ...(Array.isArray(d.callers) && d.callers.every((c) => typeof c === 'string')
        ? { callers: d.callers as string[] }
        : {}),
      ...(typeof d.until === 'string' ? { until: d.until } : {}),
      ...(d.scope === 'circuit' || d.scope === 'caller' ? { scope: d.scope } : {}),
      ...(typeof d.ramp_until === 'string' ? { rampUntil: d.ramp_until } : {}),
      ...(typeof d.retry_after_seconds === 'number' ? { retryAfterSeconds: d.retry_after_seconds } : {}),
      ...(d.shadow === true ? { shadow: true as const } : {}),
    };
  } catch {
    return null;
  }
}
