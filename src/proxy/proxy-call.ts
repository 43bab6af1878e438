import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../domain/errors.js';
import type { Circuit, Step } from '../domain/circuit.js';
import type { Classified } from '../domain/outcome-rules.js';
import type { BreakerService, Clock, RecordRules } from '../service/breaker-service.js';
import type { Flight } from './coalesce.js';
import type { HeaderRecord } from './upstream-client.js';
import { capEjection, ejectionLimit, isEjected } from './guard-rails.js';
import type { Ending, Permit, ShedReason } from './overload/concurrency-gate.js';
import { bulkheadFull, CALLER_GONE, concurrencyLimited, unknownUpstream } from './proxy-errors.js';
import type { ReplayableBody, UploadWatcher } from './replayable-body.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/**
 * One proxied call, HTTP or WebSocket, from admission to the end: which upstream the raw
 * target names, a slot under its concurrency limit, the node outcomes it records (each with
 * its duration, under the upstream's ejection cap), the one place its slot goes back, and
 * what the proxy reports of it (the hooks, at the end of this file).
 */

/** One request to proxy, on Node's request and response (the raw listener, or Hono's route under @hono/node-server). */
export interface ProxyInput {
  readonly method: string;
  readonly incoming: IncomingMessage;
  /** Its id (request-id.ts): on every answer and log line, and sent to the node. */
  readonly requestId: string;
  /** Absent for a WebSocket upgrade: the caller's socket is the handshake's. */
  readonly outgoing?: ServerResponse;
}

/** What a call is made of, fixed at admission. */
export interface CallParts {
  readonly input: ProxyInput;
  readonly upstream: Upstream;
  readonly target: ProxyTarget;
  readonly method: string;
  /** The caller's fields; `headers` are the ones sent to the node (a WebSocket handshake makes its own). */
  readonly requestHeaders: HeaderRecord;
  readonly headers: Record<string, string | string[]>;
  readonly body: ReplayableBody | null;
  /** When this request leads a coalesced call: the followers waiting on it. */
  readonly flight: Flight | null;
  readonly report: Report | null;
}

/** What a call records node outcomes with: the breaker and the injected clock (durations). */
export interface CallDeps {
  readonly breaker: BreakerService;
  readonly clock: Clock;
}

/** The attempt in progress, as the call sees it: the upload's timer watches it, a hang-up cancels it. */
export interface CallAttempt extends UploadWatcher {
  cancel(failure: 'caller_gone', reason: Error): void;
}

/** Where a proxied request goes: the upstream's name and the path (with query) below it. */
export interface ProxyTarget {
  readonly upstream: string;
  /** Starts with '/', repeated slashes collapsed, percent-encoding kept as sent. */
  readonly path: string;
}

const PREFIX = '/proxy/';
/** What only the careful segment-by-segment path below handles: dots, escapes, empty segments. */
const UNUSUAL = /[.%]|\/\//;

function decodeFully(segment: string): string {
  // Decode until stable so double-encoded dots (%252e) cannot reach an upstream that decodes twice.
  let current = segment;
  for (let i = 0; i < 3 && current.includes('%'); i++) {
    let next: string;
    try {
      next = decodeURIComponent(current);
    } catch {
      throw invalidPath('has invalid percent-encoding');
    }
    if (next === current) break;
    current = next;
  }
  return current;
}

function invalidPath(reason: string): AppError {
  return new AppError('INVALID_PATH', `The proxied path ${reason}.`);
}

/**
 * Split the raw request target (`/proxy/<upstream>/<rest>?<query>`, before any URL
 * normalisation) into upstream and path. Dot segments, also encoded ones or hidden behind
 * encoded slashes and backslashes, are refused: the target must not walk out of the node's path.
 */
export function parseProxyTarget(rawTarget: string): ProxyTarget {
  const queryAt = rawTarget.indexOf('?');
  const rawPath = queryAt === -1 ? rawTarget : rawTarget.slice(0, queryAt);
  const query = queryAt === -1 ? '' : rawTarget.slice(queryAt);
  if (!rawPath.startsWith(PREFIX)) return { upstream: '', path: '/' }; // bare /proxy: no upstream named
  const after = rawPath.slice(PREFIX.length);
  if (!UNUSUAL.test(after)) {
    // The common case, one regex test: nothing to decode, no dot segment possible, no '//'.
    const slash = after.indexOf('/');
    const rest = slash === -1 ? '' : after.slice(slash);
    return { upstream: slash === -1 ? after : after.slice(0, slash), path: `${rest.length > 1 ? rest : '/'}${query}` };
  }
  const segments = rawPath.slice(PREFIX.length).split('/');
  const upstream = decodeFully(segments[0] ?? '');
  const rest: string[] = [];
  for (let i = 1; i < segments.length; i++) {
    const segment = segments[i]!;
    if (segment === '') continue; // '//other-host' becomes '/other-host': never an authority
    if (segment.includes('.') || segment.includes('%')) {
      for (const piece of decodeFully(segment).split(/[/\\]/)) {
        if (piece === '.' || piece === '..') throw invalidPath("must not contain '.' or '..' segments");
      }
    }
    rest.push(segment);
  }
  const trailing = rest.length > 0 && rawPath.endsWith('/') ? '/' : '';
  return { upstream, path: `/${rest.join('/')}${trailing}${query}` };
}

export interface Admitted {
  readonly target: ProxyTarget;
  readonly upstream: Upstream;
}

/** The upstream a raw request target (before URL normalisation) names; 404 UPSTREAM_NOT_FOUND else. */
export function admitTarget(upstreams: ReadonlyMap<string, Upstream>, rawTarget: string): Admitted {
  const target = parseProxyTarget(rawTarget);
  const upstream = upstreams.get(target.upstream);
  if (upstream === undefined) throw unknownUpstream(target.upstream, upstreams);
  return { target, upstream };
}

/**
 * One of an upstream's concurrency places (`max_concurrent`, or `concurrency`: fixed or
 * adaptive), held from admission until the call is over; released once. Its `permit` is the
 * limit's (null when the upstream has no limit).
 */
export class Slot {
  private held = true;

  constructor(
    private readonly upstream: Upstream,
    private readonly permit: Permit | null,
  ) {
    upstream.inFlight++;
  }

  /** The call's answer head came, or it ended without one: a latency sample for an adaptive limit. */
  observe(ending: Ending): void {
    this.upstream.overload.observe(this.permit, ending);
  }

  release(): void {
    if (!this.held) return;
    this.held = false;
    this.upstream.inFlight--;
    this.upstream.overload.release(this.permit);
  }
}

/**
 * A slot now; null when the limit is full and the request may wait for one (`queue_ms`,
 * `waitForSlot`); else the 503 (BULKHEAD_FULL for `max_concurrent`, CONCURRENCY_LIMITED).
 */
export function takeSlot(upstream: Upstream): Slot | null {
  const permit = upstream.overload.tryAdmit();
  if (permit !== 'limit') return new Slot(upstream, permit);
  if (upstream.overload.mayWait) return null;
  throw refusal(upstream, 'limit');
}

/**
 * Wait up to `queue_ms` for a slot, oldest first; the 503 when none came (or the queue is full).
 * Null when the caller hung up meanwhile (it left the queue; nothing was sent).
 */
export async function waitForSlot(upstream: Upstream, outgoing: ServerResponse | undefined): Promise<Slot | null> {
  const waiting = upstream.overload.gate!.wait();
  const leave = () => waiting.cancel();
  outgoing?.once('close', leave);
  const result = await waiting.result;
  outgoing?.removeListener('close', leave);
  if (result === 'cancelled') return null;
  if (typeof result === 'string') throw refusal(upstream, result);
  const slot = new Slot(upstream, result);
  if (outgoing?.destroyed) {
    slot.release(); // granted as the caller left: no call holds it
    return null;
  }
  return slot;
}

function refusal(upstream: Upstream, reason: ShedReason): AppError {
  upstream.overload.refused(reason);
  const max = upstream.config.max_concurrent;
  return max !== undefined ? bulkheadFull(upstream, max) : concurrencyLimited(upstream, reason);
}

/** The coalescing key of a read that may share a call, or null (coalescing off, or the request must call alone). */
export function coalescingKey(upstream: Upstream, method: string, path: string, headers: HeaderRecord): string | null {
  return upstream.coalescer === null ? null : upstream.coalescer.keyOf(method, path, headers);
}

/**
 * One proxied call from admission to its end, for both transports. It owns its bulkhead
 * slot and gives it back in `end()` only: when the failover is over without an answer
 * handed off, or when the handed-off answer is over (the streamed body ended, failed or was
 * cut; the tunnel closed on both sides). Every node outcome of the call is recorded in
 * `record()`, with its duration.
 */
export class ProxyCall {
  /** The attempt in progress (its head pending, or its body streaming to the caller). */
  private current: CallAttempt | null = null;
  private handedOff = false;
  private over = false;
  private leaderGone = false;

  constructor(
    readonly parts: CallParts,
    private readonly slot: Slot,
    private readonly deps: CallDeps,
  ) {
    // A caller that hangs up cancels the attempt in progress: before the head, the node's
    // work and the bulkhead slot are freed at once; either way it says nothing against the
    // node. A leader with followers waiting is only detached: its call goes on for them.
    parts.input.outgoing?.once('close', () => this.hangUp());
  }

  /** The caller's response is over (sent, or the caller left). */
  get done(): boolean {
    return this.over;
  }

  /** The leader hung up while followers wait: the answer is still read, for them only. */
  get detached(): boolean {
    return this.leaderGone;
  }

  /** An attempt starts: the upload's timer watches it. */
  attempting(attempt: CallAttempt): void {
    this.current = attempt;
    if (this.parts.body !== null) this.parts.body.watcher = attempt; // the node's timer runs only while the upload waits on it
  }

  /** The attempt in progress failed before its head. */
  attemptOver(): void {
    this.current = null;
    if (this.parts.body !== null) this.parts.body.watcher = null;
  }

  /** Stop the attempt in progress (the caller left, or no one reads its body any more). */
  cancel(reason: Error): void {
    this.current?.cancel('caller_gone', reason);
  }

  /**
   * Record one node outcome by its kind (issue 29: `success`, `failure`, `rejected`,
   * `throttled` with the seconds the node asked for, `cancelled`), with its duration
   * (`startedAt` to now on the injected clock): every outcome of the call, HTTP or WebSocket,
   * goes through here, so a slow call counts in the node's slow-call window whatever carried
   * it, and every one is held to the upstream's ejection cap. Health checks never come here:
   * a failing check takes a node out whatever the cap says.
   */
  record(node: ProxyNode, outcome: Classified, startedAt: number): void {
    const ms = Math.max(0, this.deps.clock() - startedAt); // a wall clock may step back
    recordRequestOutcome(this.deps.breaker, this.parts.upstream, node, outcome, ms);
  }

  /** The injected clock's time (a `Retry-After` HTTP-date is read against it). */
  now(): number {
    return this.deps.clock();
  }

  /** How the failover ended, for an adaptive concurrency limit: the node's head came, it timed out, or neither. */
  observe(ending: 'answer' | 'timeout' | 'other'): void {
    this.slot.observe(ending === 'answer' ? 'answered' : ending === 'timeout' ? 'dropped' : 'unjudged');
  }

  /** The node's answer is being streamed (or tunnelled): the slot is the answer's until `end()`. */
  handOff(): void {
    this.handedOff = true;
  }

  /** After the failover: a call whose answer was not handed off is over now. */
  settle(): void {
    if (!this.handedOff) this.end();
  }

  /** The call is over: the one place its bulkhead slot is released. */
  end(): void {
    this.over = true;
    this.current = null;
    this.slot.release();
  }

  private hangUp(): void {
    if (this.over) return;
    const flight = this.parts.flight;
    if (flight !== null && flight.followers > 0 && !flight.settled) {
      this.leaderGone = true;
      return;
    }
    this.over = true;
    this.cancel(CALLER_GONE);
  }
}

/** One upstream's ejection cap, made once: each node's rules for `record` (its peers, the guard over them). */
type EjectionCap = ReadonlyMap<string, RecordRules>;

const caps = new WeakMap<Upstream, EjectionCap | null>();

/** The upstream's cap, or null when `max_ejection_percent` lets every node be opened. */
function ejectionCapOf(upstream: Upstream): EjectionCap | null {
  let cap = caps.get(upstream);
  if (cap !== undefined) return cap;
  const limit = ejectionLimit(upstream.nodes.length, upstream.config.max_ejection_percent);
  cap = null;
  if (limit < upstream.nodes.length) {
    const guard = (step: Step, before: Circuit | null, others: readonly (Circuit | null)[]) =>
      capEjection(step, before, others.filter(isEjected).length, limit);
    const { create } = upstream.recordOptions;
    cap = new Map(
      upstream.nodes.map((n) => {
        const peers = upstream.nodes.filter((p) => p !== n).map((p) => p.circuit);
        return [n.circuit, { create, among: { peers, guard } }];
      }),
    );
  }
  caps.set(upstream, cap);
  return cap;
}

/**
 * The outcome on its node, under the upstream's ejection cap: an outcome that could open the
 * node (any but a success where no window judges slow calls: a `count_as` may make any kind
 * a failure) is written together with a read of its peers, and a trip past
 * `max_ejection_percent` is withheld (guard-rails.ts).
 */
function recordRequestOutcome(
  breaker: BreakerService,
  upstream: Upstream,
  node: ProxyNode,
  { kind, retryAfterSeconds }: Classified,
  durationMs: number,
): void {
  const success = kind === 'success';
  const outcome = {
    success,
    kind,
    ...(retryAfterSeconds == null ? {} : { retryAfterSeconds }),
    durationMs,
    caller: upstream.recordOptions.caller,
  };
  const cap = ejectionCapOf(upstream);
  if (cap === null || (success && upstream.settings.window?.slowCallDurationMs == null)) {
    void breaker.record(node.circuit, outcome, upstream.recordOptions);
    return;
  }
  void breaker.record(node.circuit, outcome, cap.get(node.circuit));
}

/**
 * What the proxy reports as it works (metrics count these). Optional in the proxy's deps;
 * a node is `null` when no node answered.
 */
export interface ProxyHooks {
  /** One proxied request finished its head: the status sent to the caller and who answered. */
  proxyRequest(
    upstream: string,
    node: { readonly id: string; readonly dc: string; readonly local: boolean } | null,
    status: number,
    durationMs: number,
  ): void;
  /** A proxied request ended in a problem document (`error` is what was thrown). */
  proxyError(upstream: string, error: unknown, durationMs: number): void;
  /** A fallback answer was served instead of a node's. */
  proxyFallback(upstream: string, kind: 'stale' | 'static'): void;
  /** An upstream entered (`true`) or left panic (`panic_threshold_percent`); optional. */
  proxyPanic?(upstream: string, panic: boolean): void;
  /** One active health check of a node. */
  healthCheck(upstream: string, node: string, result: 'success' | 'failure'): void;
  /** A request refused a concurrency slot (`circuitlog_proxy_shed_total{upstream, reason}`). */
  proxyShed?(upstream: string, reason: ShedReason): void;
  /** A retry on another node, sent or refused by the budget (`circuitlog_proxy_retries_total{upstream, result}`). */
  proxyRetry?(upstream: string, result: 'sent' | 'budget_exhausted'): void;
  /** A caller that stopped reading was cut off after `send_timeout_ms` (`circuitlog_proxy_send_timeouts_total{upstream}`). */
  proxySendTimeout?(upstream: string): void;
  /** Called once with a reader of every limited upstream's limit and requests in flight (for the gauges). */
  proxyConcurrency?(read: () => readonly UpstreamConcurrency[]): void;
}

/** One upstream's concurrency now: its limit (null: none) and its requests (and tunnels) holding a slot. */
export interface UpstreamConcurrency {
  readonly upstream: string;
  readonly kind: 'fixed' | 'adaptive' | null;
  readonly limit: number | null;
  readonly inFlight: number;
}

/** A node as the hooks see it. */
export type ReportedNode = { readonly id: string; readonly dc: string; readonly local: boolean };

/** For the hooks: which upstream a request was for, who answered and with what status. */
export interface Report {
  upstream?: string;
  node: ReportedNode | null;
  status: number;
}

/** Note who answered and with what status (a no-op without hooks). */
export function report(r: Report | null, node: ReportedNode | null, status: number): void {
  if (r === null) return;
  r.node = node;
  r.status = status;
}

/**
 * Run one proxied request (HTTP or WebSocket) under the hooks: `proxyRequest` with the status
 * sent (or `statusOf` the result), `proxyError` with what was thrown; only once the upstream is known.
 */
export async function reported<T>(
  hooks: ProxyHooks,
  run: (r: Report) => Promise<T>,
  statusOf: (result: T) => number,
): Promise<T> {
  const started = performance.now();
  const r: Report = { node: null, status: 0 };
  try {
    const result = await run(r);
    if (r.upstream !== undefined)
      hooks.proxyRequest(r.upstream, r.node, r.status || statusOf(result), performance.now() - started);
    return result;
  } catch (error) {
    if (r.upstream !== undefined) hooks.proxyError(r.upstream, error, performance.now() - started);
    throw error;
  }
}
