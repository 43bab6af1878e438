/** The Transport over HTTP, with undici (which the service already ships) and keep-alive. */

import { Client, Pool } from 'undici';
import type { CircuitState } from '../domain/circuit.js';
import { SseParser } from './sse.js';
import { TransportError, type AllowedAnswer, type OpenStream, type Transport, type TransitionEvent } from './transport.js';

export interface HttpTransportOptions {
  /** circuitlog's base URL, e.g. `http://127.0.0.1:8080` (a path prefix is kept). */
  readonly url: string;
  readonly token?: string;
  /** Longest wait for an answer to one request. */
  readonly requestTimeoutMs: number;
  /** A stream silent for this long is dead (the server sends a heartbeat every 15 s). */
  readonly streamIdleTimeoutMs: number;
  readonly connections: number;
}

type Headers = Record<string, string>;
type Response = { statusCode: number; headers: Record<string, string | string[] | undefined>; body: { json(): Promise<unknown>; dump(): Promise<void> } };

const STATES: readonly string[] = ['closed', 'open', 'half_open'];
/** undici's and Node's codes for a socket the other side closed (a kept-alive connection it dropped). */
const SOCKET_CLOSED = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

export function createHttpTransport(options: HttpTransportOptions): Transport {
  const base = new URL(options.url);
  const prefix = base.pathname.replace(/\/+$/, '');
  const pool = new Pool(base.origin, { connections: options.connections });
  // Batches of outcomes go on one connection of their own, pipelined two deep: circuitlog
  // reads them in the order sent, and starts on the next while answering the previous.
  const outcomes = new Client(base.origin, { pipelining: 2 });
  const auth: Headers = options.token ? { authorization: `Bearer ${options.token}` } : {};
  const streams = new Set<AbortController>();
  const timeouts = { headersTimeout: options.requestTimeoutMs, bodyTimeout: options.requestTimeoutMs };

  async function send(method: 'GET' | 'POST', path: string, headers: Headers, body?: string): Promise<Response> {
    try {
      return (await pool.request({ method, path: prefix + path, headers: { ...auth, ...headers }, body, ...timeouts })) as Response;
    } catch (error) {
      throw unreachable(error);
    }
  }

  return {
    async allowed(name) {
      const path = `/circuits/${encodeURIComponent(name)}/allowed`;
      // A GET is safe to repeat: once more when a kept-alive socket was closed under us.
      const res = await send('GET', path, {}).catch((error: TransportError) => {
        if (SOCKET_CLOSED.has((error.cause as { code?: string } | undefined)?.code ?? '')) return send('GET', path, {});
        throw error;
      });
      const body = await readJson(res);
      if (res.statusCode === 200) return allowedAnswer(body);
      if (res.statusCode === 503 && isOpenProblem(body)) return refusal(body, res);
      throw failure(res.statusCode, body);
    },

    async circuit(name) {
      const res = await send('GET', `/circuits/${encodeURIComponent(name)}`, {});
      const body = await readJson(res);
      if (res.statusCode === 200 && typeof body === 'object' && body !== null) return body as Record<string, unknown>;
      if (res.statusCode === 404) return null;
      throw failure(res.statusCode, body);
    },

    async postOutcomes(items) {
      let res: Response;
      try {
        res = (await outcomes.request({
          method: 'POST',
          path: `${prefix}/outcomes`,
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ outcomes: items }),
          // Lets undici pipeline it; a batch is already sent again after a lost answer (at least once).
          idempotent: true,
          ...timeouts,
        })) as Response;
      } catch (error) {
        throw unreachable(error);
      }
      const body = await readJson(res);
      if (res.statusCode !== 200) throw failure(res.statusCode, body);
    },

    async openStream(lastEventId, onEvent) {
      const controller = new AbortController();
      const headers: Headers = { ...auth, accept: 'text/event-stream' };
      if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      let res;
      try {
        res = await pool.request({
          method: 'GET',
          path: `${prefix}/events/stream`,
          headers,
          signal: controller.signal,
          headersTimeout: options.requestTimeoutMs,
          bodyTimeout: options.streamIdleTimeoutMs,
        });
      } catch (error) {
        throw unreachable(error);
      }
      if (res.statusCode !== 200) {
        // A problem document means circuitlog is up and refused the stream (too many open, bad
        // token): the client keeps asking it per call rather than going offline.
        const problem = await readJson(res as Response);
        if (isProblem(problem)) throw new TransportError('rejected', `stream refused: ${res.statusCode}`, res.statusCode, problem);
        throw failure(res.statusCode, problem);
      }
      streams.add(controller);
      const parser = new SseParser((message) => {
        if (message.event !== 'transition' || message.id === undefined) return;
        const event = parseTransition(message.data, message.id);
        if (event !== null) onEvent(event);
      });
      const ended = (async () => {
        try {
          for await (const chunk of res.body) parser.push(chunk as Uint8Array);
        } catch {
          // aborted, reset or idle past streamIdleTimeoutMs: the stream has ended either way
        } finally {
          streams.delete(controller);
        }
      })();
      return { ended, close: () => controller.abort() } satisfies OpenStream;
    },

    async close() {
      for (const controller of streams) controller.abort();
      await Promise.all([pool.close(), outcomes.close()]);
    },
  };
}

async function readJson(res: Response): Promise<unknown> {
  try {
    return await res.body.json();
  } catch {
    return null; // an empty or non-JSON body: the status says enough
  }
}

function unreachable(error: unknown): TransportError {
  const code = (error as { code?: string }).code;
  return new TransportError('unreachable', `circuitlog unreachable${code ? ` (${code})` : ''}`, undefined, undefined, { cause: error });
}

function failure(status: number, problem: unknown): TransportError {
  const kind = status >= 500 ? 'unreachable' : 'rejected';
  return new TransportError(kind, `circuitlog answered ${status}`, status, problem);
}

function isProblem(body: unknown): boolean {
  return typeof (body as { code?: unknown } | null)?.code === 'string';
}

function isOpenProblem(body: unknown): body is Record<string, unknown> {
  const code = (body as { code?: unknown } | null)?.code;
  return code === 'CIRCUIT_OPEN' || code === 'CIRCUIT_FORCED_OPEN';
}

function stateOf(value: unknown, fallback: CircuitState): CircuitState {
  return typeof value === 'string' && STATES.includes(value) ? (value as CircuitState) : fallback;
}

function allowedAnswer(body: unknown): AllowedAnswer {
  const b = (body ?? {}) as Record<string, unknown>;
  const circuit = typeof b.circuit === 'object' && b.circuit !== null ? (b.circuit as Record<string, unknown>) : null;
  return { allowed: true, state: stateOf(b.state, 'closed'), circuit };
}

function refusal(body: Record<string, unknown>, res: Response): AllowedAnswer {
  const forced = body.code === 'CIRCUIT_FORCED_OPEN';
  const state = stateOf(body.state, 'open');
  const openUntil = typeof body.open_until === 'string' ? Date.parse(body.open_until) : NaN;
  const retryAfterSeconds = Number(res.headers['retry-after']);
  const retryAfterMs = (Number.isFinite(retryAfterSeconds) && retryAfterSeconds >= 0 ? retryAfterSeconds : 1) * 1000;
  const retryAt = !forced && state === 'open' && Number.isFinite(openUntil) ? openUntil : Date.now() + retryAfterMs;
  return { allowed: false, state, retryAt, retryAfterMs, forced };
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
    };
  } catch {
    return null;
  }
}
