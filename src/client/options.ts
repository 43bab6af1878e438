/**
 * The client's options (each with its default, filled in here once, with units), call
 * options, events and counters; and the caller id the client names on every outcome and
 * admission (issue 17): option `caller`, default the host name (so a quorum counts hosts,
 * however many processes each runs), checked by the server's own rule (domain/caller.ts).
 */

import { hostname as osHostname } from 'node:os';
import { CALLER_MAX_LENGTH, callerProblem } from '../domain/caller.js';
import type { CircuitSettings } from '../domain/circuit.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import type { Classification } from './classify.js';
import { createHttpTransport } from './http-transport.js';
import { authHeaders, type TokenProvider } from './token-source.js';
import type { OutcomeQueueOptions } from './outcome-queue.js';
import { SSE_LIMITS, backoffDelay } from './sse.js';
import type { StreamReset, Transport, TransitionEvent } from './transport.js';
import type { ConnectionState } from './view.js';

export interface ClientOptions {
  /** circuitlog's base URL, e.g. `http://127.0.0.1:8080`. */
  readonly url: string;
  /**
   * Sent as `Authorization: Bearer <token>` (`CIRCUITLOG_TOKEN`, or a credential of the credentials
   * file): a string, or a provider asked before each request (sync or async: a rotating token).
   */
  readonly token?: string | TokenProvider;
  /**
   * A file holding the token (a Kubernetes projected service-account token): read at start,
   * read again when its modification time changes (looked at at most once per second).
   */
  readonly tokenFile?: string;
  /** While circuitlog is unreachable: true (default) runs calls behind a local breaker; false refuses them. */
  readonly failOpen?: boolean;
  /** Outcomes wait at most this long before they are sent (default 5 ms). */
  readonly flushDelayMs?: number;
  /** Queued outcomes that are sent at once, without waiting for `flushDelayMs` (default 250). */
  readonly flushAt?: number;
  /** Most outcomes per `POST /outcomes` (default 1,000, circuitlog's limit); more pile up while one is in flight. */
  readonly maxBatch?: number;
  /**
   * Outcomes not yet acknowledged (default 10,000). At this many, calls wait while circuitlog is
   * reachable (backpressure); while it is unreachable, the oldest are dropped and counted.
   */
  readonly maxQueuedOutcomes?: number;
  /**
   * Circuits the client keeps in its local view (and local breakers), default 10,000; past it the
   * least recently used is dropped and asked of circuitlog again on its next call.
   */
  readonly maxCircuits?: number;
  /** Deadline of one request to circuitlog, its whole answer included (default 2 s). */
  readonly requestTimeoutMs?: number;
  /** Largest answer read from circuitlog; a longer one counts as no answer (default 1 MiB). */
  readonly maxResponseBytes?: number;
  /** Longest event-stream line, in characters; past it the stream is dropped and reopened (default 64 Ki). */
  readonly maxStreamLineChars?: number;
  /** Most data characters in one stream event; past it the stream is dropped and reopened (default 1 Mi). */
  readonly maxStreamEventChars?: number;
  /** Cap of the reconnect backoff (default 5 s). */
  readonly reconnectMaxDelayMs?: number;
  /** A stream silent this long is reconnected (default 45 s; circuitlog sends a heartbeat every 15 s). */
  readonly streamIdleTimeoutMs?: number;
  /** How long `close()` tries to deliver what is queued (default 10 s). */
  readonly closeTimeoutMs?: number;
  /** Local breaker policy for circuits never seen while connected (default 5 failures, 30 s, 1 probe). */
  readonly localDefaults?: Partial<CircuitSettings>;
  /**
   * Who this client is to circuitlog: sent as `caller` on every outcome and admission, so a
   * circuit with a quorum opens for everyone only on evidence from several callers, and
   * isolates this one alone when only its calls fail. Default: with a token (or token file),
   * `<id>/<hostname>/<pid>`, `<id>` the credential's id as `GET /whoami` answers it at start
   * (the host name when the server names no caller patterns: CIRCUITLOG_TOKEN, or a server
   * before /whoami); without a token, the host name.
   */
  readonly caller?: string;
  /** Connections to circuitlog, besides the stream's (default 8). */
  readonly connections?: number;
  /** For tests: replaces HTTP. */
  readonly transport?: Transport;
  /** For tests: epoch milliseconds now. */
  readonly clock?: () => number;
  /** For tests: uniform numbers in [0, 1) for soft throttling's draws (default `Math.random`). */
  readonly random?: () => number;
}

export interface CallOptions<T, F> {
  /** Called instead of throwing when the call is refused, throws or times out; its result is returned. */
  readonly fallback?: (error: unknown) => F;
  /**
   * Decides only what is recorded (default: a thrown error is a failure, a result a success);
   * the result is still returned and the error still thrown.
   */
  readonly isFailure?: (error: unknown, result: T | undefined) => boolean;
  /**
   * Decides the outcome's kind (docs/client.md "Why a call failed"): a kind, `{ kind,
   * retryAfterSeconds?, deadlineMs? }`, or undefined for the default (`isFailure` if given, else
   * the client's own classification). Wins over `isFailure`. Decides only what is recorded.
   */
  readonly classify?: (error: unknown, result: T | undefined) => Classification;
  /** A slower call is recorded as a failure, its signal aborted, and `CallTimeoutError` thrown. */
  readonly timeoutMs?: number;
  /**
   * The caller's own signal: when it aborts, `fn`'s signal aborts too and the call throws its
   * reason at once. Recorded as `caller_deadline` when the reason is a `TimeoutError` (as
   * `AbortSignal.timeout()` gives), else as `cancelled`; an already aborted signal runs nothing.
   */
  readonly signal?: AbortSignal;
  /** The caller's deadline in ms, reported with a `caller_deadline` (default: the time the call ran). */
  readonly deadlineMs?: number;
}

export interface ClientEvents {
  transition: TransitionEvent;
  connection: { readonly state: ConnectionState; readonly error?: Error };
  /** circuitlog could not resume the stream where the client asked (`event: reset`); every circuit is snapshotted afresh. */
  reset: StreamReset;
  /** circuitlog refused a batch with a 4xx (never expected: names are checked first); it is dropped. */
  rejected: { readonly count: number; readonly error: Error };
}

export interface ClientStats {
  readonly connection: ConnectionState;
  /** Calls admitted without asking circuitlog (closed in the local view). */
  readonly localDecisions: number;
  /** `GET /allowed` requests answered. */
  readonly serverChecks: number;
  /** Calls decided by the local breaker while circuitlog was unreachable. */
  readonly offlineDecisions: number;
  /** Calls this client's soft throttle refused on circuits closed in its view (no request made). */
  readonly throttledLocally: number;
  readonly outcomesPending: number;
  readonly outcomesAcknowledged: number;
  /** Dropped while unreachable, past `maxQueuedOutcomes`. */
  readonly outcomesDropped: number;
  /** Refused by circuitlog with a 4xx. */
  readonly outcomesRejected: number;
  readonly lastEventId: string | undefined;
}

/** The options with every default filled in, once, with units: what the client is built from. */
export interface ClientSettings {
  readonly transport: Transport;
  readonly clock: () => number;
  /** Soft throttling's draws, uniform in [0, 1). */
  readonly random: () => number;
  readonly failOpen: boolean;
  readonly closeTimeoutMs: number;
  readonly reconnectMaxDelayMs: number;
  readonly maxCircuits: number;
  /** The local breakers' policy for a circuit never seen while connected. */
  readonly localDefaults: CircuitSettings;
  /** How long a locally admitted half-open probe holds its slot. */
  readonly probeLeaseMs: number;
  readonly queue: OutcomeQueueOptions;
  /** This client's caller id, sent on every outcome and admission (option `caller`); undefined: ask GET /whoami. */
  readonly caller: string | undefined;
}

function transportFor(options: ClientOptions): Transport {
  return (
    options.transport ??
    createHttpTransport({
      url: options.url,
      auth: authHeaders(options.token, options.tokenFile, options.clock),
      requestTimeoutMs: options.requestTimeoutMs ?? 2_000, // 2 s, a deadline
      maxResponseBytes: options.maxResponseBytes,
      streamLimits: {
        maxLineChars: options.maxStreamLineChars ?? SSE_LIMITS.maxLineChars,
        maxEventChars: options.maxStreamEventChars ?? SSE_LIMITS.maxEventChars,
      },
      streamIdleTimeoutMs: options.streamIdleTimeoutMs ?? 45_000, // 45 s: three missed heartbeats
      connections: options.connections ?? 8,
    })
  );
}

/** Every option resolved; throws a TypeError for an unusable `maxCircuits`. */
export function clientSettings(options: ClientOptions): ClientSettings {
  const reconnectMaxDelayMs = options.reconnectMaxDelayMs ?? 5_000; // 5 s
  const maxCircuits = options.maxCircuits ?? 10_000;
  const transport = transportFor(options);
  if (!Number.isInteger(maxCircuits) || maxCircuits < 1)
    throw new TypeError(`maxCircuits must be an integer >= 1, got ${String(maxCircuits)}`);
  const { failureThreshold, timeoutSeconds, halfOpenMaxCalls } = POLICY_DEFAULTS.circuit;
  return {
    transport,
    clock: options.clock ?? Date.now,
    random: options.random ?? Math.random,
    // Default: the host name; with a token, learnt from GET /whoami at start (credentialCaller).
    caller:
      options.caller === undefined && (options.token !== undefined || options.tokenFile !== undefined)
        ? undefined
        : checkedCaller(options.caller),
    failOpen: options.failOpen ?? true,
    closeTimeoutMs: options.closeTimeoutMs ?? 10_000, // 10 s
    reconnectMaxDelayMs,
    maxCircuits,
    localDefaults: { failureThreshold, timeoutSeconds, halfOpenMaxCalls, ...options.localDefaults },
    probeLeaseMs: POLICY_DEFAULTS.probeLeaseSeconds * 1000, // as the server's default
    queue: {
      flushAt: Math.min(options.flushAt ?? 250, options.maxBatch ?? 1_000),
      maxBatch: options.maxBatch ?? 1_000,
      maxInFlight: 2,
      flushDelayMs: options.flushDelayMs ?? 5, // 5 ms
      capacity: options.maxQueuedOutcomes ?? 10_000,
      retryDelayMs: (attempt) => backoffDelay(attempt, reconnectMaxDelayMs),
    },
  };
}

/**
 * The host name, with any character a caller id may not hold replaced by '-' and cut to the
 * longest id: every process on one host is one caller, so a quorum of 3 needs 3 hosts.
 */
export function defaultCaller(hostname = osHostname()): string {
  return (hostname.replace(/[^A-Za-z0-9_.:~-]/g, '-') || 'host').slice(0, CALLER_MAX_LENGTH);
}

/**
 * The default caller of a client whose credential `GET /whoami` names (issue 30):
 * `<id>/<hostname>/<pid>` when its caller patterns allow it (the default patterns `<id>` and
 * `<id>/*` do), else `<id>` when they allow that; the host name when the server names no patterns
 * (CIRCUITLOG_TOKEN, no credentials); undefined when neither fits (the server then counts the
 * outcomes as the credential's id).
 */
export function credentialCaller(
  id: string,
  callers: readonly string[] | null,
  hostname = osHostname(),
  pid = process.pid,
): string | undefined {
  if (callers === null) return defaultCaller(hostname);
  const allowed = (name: string) =>
    callerProblem(name) === null &&
    callers.some((p) => (p.endsWith('*') ? name.startsWith(p.slice(0, -1)) : p === name));
  const full = `${id}/${defaultCaller(hostname)}/${pid}`.slice(0, CALLER_MAX_LENGTH);
  if (allowed(full)) return full;
  return allowed(id) ? id : undefined;
}

/** The option checked: a TypeError naming the rule when it is no valid caller id. */
export function checkedCaller(caller: unknown): string {
  if (caller === undefined) return defaultCaller();
  const problem = typeof caller === 'string' ? callerProblem(caller) : 'must be a string';
  if (problem !== null) throw new TypeError(`Invalid caller '${String(caller)}': ${problem}`);
  return caller as string;
}
