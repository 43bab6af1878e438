import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { type Classified, kindOfStatus } from '../domain/outcome-rules.js';
import type { BreakerService, Clock } from '../service/breaker-service.js';
import { NodePick, type NodeUse, type PanicWatches, type Pick, pickInPanic } from './node-picker.js';
import type { ProxyCall } from './proxy-call.js';
import type { UploadWatcher } from './replayable-body.js';
import { isNothingSent, type UpstreamClient } from './upstream-client.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/** Methods that may be replayed on another node after reaching one (RFC 9110 section 9.2.2). */
export const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** A node answer that did its job (2xx, 3xx): one object, no allocation per answer. */
export const SUCCESS: Classified = Object.freeze({ kind: 'success' });
/** A node failure: a failure status, a reset, a refusal, a timeout. */
export const FAILURE: Classified = Object.freeze({ kind: 'failure' });
/** The caller closed its connection before the node answered. */
export const CANCELLED: Classified = Object.freeze({ kind: 'cancelled' });

/**
 * The kind of a node's answer (docs/proxy.md#how-a-node-answer-counts). With `failure_statuses`
 * set, the statuses listed are failures and no others (a status the table calls a failure but
 * the list leaves out counts as a success, as before issue 29); without it, issue 29's table
 * (`kindOfStatus`): 408 and 5xx but 501 and 505 are failures, 429 and 503 with `Retry-After`
 * throttled, other 4xx rejected. The answer's `Retry-After` is read only for a status that may be throttled.
 */
export function answerKind(upstream: Upstream, status: number, answer: RetryAfterSource, now: number): Classified {
  const listed = upstream.failureStatuses;
  if (listed?.has(status)) return FAILURE;
  if (status < 400) return SUCCESS; // the common answer, without a call
  const classified = kindOfStatus(status, status === 429 || status === 503 ? answer.retryAfter() : undefined, now);
  return listed !== null && classified.kind === 'failure' ? SUCCESS : classified;
}

/** Where a node answer's `Retry-After` field is read from (an HTTP attempt, a handshake's answer). */
export interface RetryAfterSource {
  retryAfter(): string | undefined;
}

/** How one try of one node ended; `A` is the transport's answer (an HTTP head, a WebSocket handshake answer), `outcome` its kind. */
export type Tried<A> =
  | { readonly kind: 'answer'; readonly answer: A; readonly outcome: Classified; readonly startedAt: number }
  | { readonly kind: 'timeout' | 'unreachable' | 'refused'; readonly startedAt: number }
  /** `cancelled`: the caller closed its connection first (recorded `cancelled`); else its upload fell silent (nothing recorded). */
  | { readonly kind: 'caller_gone'; readonly startedAt: number; readonly cancelled: boolean };

/** One transport's side of the failover: HTTP forwarding (`HttpTransport`, below) or the WebSocket handshake (ws-handshake.ts). */
export interface Transport<A> {
  /** The call it serves: its upstream and method, and where node outcomes are recorded. */
  readonly call: ProxyCall;
  /** Try `node`; `startedAt` is the clock when it was dispatched. */
  attempt(node: ProxyNode, startedAt: number): Promise<Tried<A>>;
  /** Whether the request could be sent whole again (its body is kept, or it has none). */
  replayable(): boolean;
  /** Throw away a failing answer that a retry on another node supersedes. */
  discard(answer: A): void;
}

/**
 * How the failover ended. `answer` with `recorded` false (a success or a rejection) is the
 * node's to judge (its `outcome` is recorded on the call once the answer is over) when
 * `use.judged`; `recorded`: the core recorded it (a failure or a throttled answer, passed back
 * as sent). `use` also carries the marks for the answer's head.
 */
export type Ending<A> =
  | {
      readonly kind: 'answer';
      readonly node: ProxyNode;
      readonly answer: A;
      readonly outcome: Classified;
      readonly recorded: boolean;
      readonly startedAt: number;
      readonly use: NodeUse;
    }
  | { readonly kind: 'no_node'; readonly retryAt: number | null }
  | { readonly kind: 'timeout' | 'unreachable' }
  | { readonly kind: 'caller_gone' };

export interface FailoverDeps {
  readonly breaker: BreakerService;
  readonly clock: Clock;
  /** On a storage outage, use the local DC's nodes without their breakers. */
  readonly failOpen: boolean;
  /** The upstreams' panic state (`panic_threshold_percent`); absent: never in panic. */
  readonly panics?: PanicWatches;
}

/**
 * The one failover loop: pick a node (local DC first), try it; a failure (timeout,
 * unreachable, refused, a failure status: `answerKind`) is recorded against the node and,
 * for an idempotent method within `retries` and the upstream's retry budget (`retry_budget`,
 * overload/upstream-overload.ts), the next node is tried. A throttled answer is recorded at
 * once (the node cools down for the time it asked) and goes back as sent, or, with
 * `retry_throttled`, is retried like a failure. A refused connection sent nothing, so any
 * method moves on, outside the budget. When no node is left, the last failing answer goes
 * back as sent, or the last failure is the ending. A caller that left first is `cancelled`.
 */
export async function failover<A>(deps: FailoverDeps, t: Transport<A>): Promise<Ending<A>> {
  const { call } = t;
  const { upstream, method } = call.parts;
  const panic = { holds: deps.panics?.of(upstream)?.holds() ?? false };
  let tried: Set<ProxyNode> | null = null;
  let budget = upstream.config.retries;
  let last: Ending<A> | null = null;
  let sent = false;
  for (;;) {
    const picking = panic.holds ? null : new NodePick(upstream, tried, deps.breaker, deps.failOpen);
    const quick = picking?.now() ?? null; // the fast path: a node its breaker admits, answered at once
    const pick = quick?.node ? quick : await choose(deps, upstream, tried, panic, picking, quick);
    if (pick.node === null) return last ?? { kind: 'no_node', retryAt: pick.retryAt };
    if (last?.kind === 'answer') t.discard(last.answer);
    const { node, use } = pick;
    if (!sent) upstream.overload.requestSent(); // the retry budget's base: requests that reached the failover's first attempt
    sent = true;
    const tr = await t.attempt(node, deps.clock());
    if (tr.kind === 'caller_gone') {
      if (tr.cancelled && use.judged) call.record(node, CANCELLED, tr.startedAt);
      return tr;
    }
    const outcome = tr.kind === 'answer' ? tr.outcome : FAILURE;
    if (tr.kind === 'answer' && outcome.kind !== 'failure' && outcome.kind !== 'throttled')
      return { kind: 'answer', node, answer: tr.answer, outcome, recorded: false, startedAt: tr.startedAt, use };
    if (use.judged) call.record(node, outcome, tr.startedAt);
    (tried ??= new Set()).add(node);
    last =
      tr.kind === 'answer'
        ? { kind: 'answer', node, answer: tr.answer, outcome, recorded: true, startedAt: tr.startedAt, use }
        : { kind: tr.kind === 'timeout' ? 'timeout' : 'unreachable' };
    const replayable = t.replayable();
    if (tr.kind === 'refused' && replayable) continue; // nothing was sent: free to move on
    if (outcome.kind === 'throttled' && !upstream.config.retry_throttled) return last; // as Envoy: a 429 is retried only when asked
    if (!IDEMPOTENT.has(method) || budget === 0 || !replayable) return last;
    if (!upstream.overload.retryAllowed()) return last; // over the retry budget: the first attempt's result stands
    budget--;
  }
}

/**
 * The node for the next attempt when the fast path has none: the breakers' walk finished
 * (`picking`, or its answer `quick`), or, while the upstream is in panic, a pick over every
 * node (node-picker.ts). A walk that finds no node has the nodes read again at once, so the request
 * that finds every node out is the first one served in panic.
 */
async function choose(
  deps: FailoverDeps,
  upstream: Upstream,
  tried: ReadonlySet<ProxyNode> | null,
  panic: { holds: boolean },
  picking: NodePick | null,
  quick: Pick | null,
): Promise<Pick> {
  if (picking !== null) {
    const pick = quick ?? (await picking.later());
    const watch = pick.node === null ? deps.panics?.of(upstream) : undefined;
    if (watch === undefined) return pick;
    watch.stale();
    if (!watch.holds()) return pick;
    panic.holds = true;
  }
  return (await pickInPanic(upstream, deps.breaker, tried)) ?? { node: null, retryAt: null };
}

/**
 * HTTP forwarding: the failover core's transport for a plain request, one undici dispatch
 * per attempt, each attempt an `Attempt` (the dispatch handler below).
 */

/** Why an attempt ended before a head arrived. */
export type AttemptFailure = 'timeout' | 'unreachable' | 'refused' | 'caller_gone';

/** Where the body of an answer goes once the proxy has decided what to do with it. */
export interface BodySink {
  /** Returns false to stop reading until `resume` is called. */
  write(chunk: Buffer, resume: () => void): boolean;
  end(): void;
  /** The body broke: the node's fault, or our own abort (`Attempt.abort`). */
  fail(error: Error): void;
}

const HOLD_BYTES = 64 * 1024; // 64 KiB of body held while the head is being judged
const TIMEOUT = Object.assign(new Error('attempt timed out'), { code: 'CIRCUITLOG_ATTEMPT_TIMEOUT' });

function onTimeout(attempt: Attempt): void {
  attempt.cancel('timeout', TIMEOUT);
}

/**
 * One try of one node, as an undici dispatch handler (undici 7's `onRequestStart` …
 * `onResponseError`): `settle` is called once, with the head (`status`, `rawHeaders`, as
 * undici read them) or a `failure`. Body bytes that arrive before `attach` are held (reading
 * pauses past 64 KiB); then they go to the sink. One object per attempt, no promise, stream
 * or AbortSignal of its own: the forwarding hot path (issue 12).
 */
export class Attempt implements Dispatcher.DispatchHandler, UploadWatcher, RetryAfterSource {
  status = 0;
  rawHeaders: Buffer[] = [];
  failure: AttemptFailure | null = null;
  error: Error | null = null;
  private controller: Dispatcher.DispatchController | null = null;
  private cancelled: Error | null = null;
  private timer: NodeJS.Timeout | null;
  private settle: ((attempt: Attempt) => void) | null;
  private readonly resumeFn = (): void => this.controller?.resume();
  private sink: BodySink | null = null;
  private held: Buffer[] | null = null;
  private heldBytes = 0;
  private ended = false;
  private bodyError: Error | null = null;

  constructor(
    private readonly timeoutMs: number,
    settle: (attempt: Attempt) => void,
    /** True when the caller's own side broke (its upload failed): not the node's fault. */
    private readonly callerBroke: () => boolean,
    /** When it was dispatched (the injected clock, ms): its outcome's duration runs from here (or from the end of the request body). */
    public startedAt = 0,
    private readonly clock: () => number = () => 0,
  ) {
    this.settle = settle;
    this.timer = setTimeout(onTimeout, timeoutMs, this);
  }

  /** The upload waits on the caller: the node's clock stops. */
  callerTurn(): void {
    this.clearTimer();
  }

  /** The upload waits on the node (connecting, not reading): its full timeout starts again. */
  nodeTurn(): void {
    if (this.answered || this.settle === null || this.timer !== null) return;
    this.timer = setTimeout(onTimeout, this.timeoutMs, this);
  }

  /** The request body is complete: the node is timed (and its outcome's duration runs) from now. */
  bodyEnded(): void {
    if (this.answered || this.settle === null) return;
    this.clearTimer();
    this.startedAt = this.clock();
    this.timer = setTimeout(onTimeout, this.timeoutMs, this);
  }

  get answered(): boolean {
    return this.status !== 0;
  }

  /** The answer's first `Retry-After` field, from undici's raw list (names as sent: any case). */
  retryAfter(): string | undefined {
    const raw = this.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2)
      if (raw[i]!.length === 11 && raw[i]!.toString('latin1').toLowerCase() === 'retry-after')
        return raw[i + 1]!.toString('latin1');
    return undefined;
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.cancelled !== null) controller.abort(this.cancelled);
  }

  onResponseStart(controller: Dispatcher.DispatchController, status: number): void {
    if (status < 200) return; // interim answers other than 100 reach here; skip them (RFC 9110 section 15.2)
    this.clearTimer();
    this.status = status;
    this.rawHeaders = (controller.rawHeaders as Buffer[] | null | undefined) ?? []; // undici's raw list: names as sent, repeats kept
    this.finish();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.sink !== null) {
      if (!this.sink.write(chunk, this.resumeFn)) controller.pause();
      return;
    }
    (this.held ??= []).push(chunk);
    this.heldBytes += chunk.length;
    if (this.heldBytes >= HOLD_BYTES) controller.pause();
  }

  onResponseEnd(): void {
    this.ended = true;
    this.sink?.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.clearTimer();
    if (this.answered) {
      this.bodyError = error;
      this.sink?.fail(error);
      return;
    }
    if (this.settle === null) return; // already settled by our own timeout or cancel
    this.error = error;
    this.failure = this.callerBroke() ? 'caller_gone' : isNothingSent(error) ? 'refused' : 'unreachable';
    this.finish();
  }

  /** Stop this attempt: before the head it settles at once with `failure`; after, the body fails. */
  cancel(failure: 'timeout' | 'caller_gone', reason: Error): void {
    this.clearTimer();
    if (!this.answered && this.settle !== null) {
      this.failure = failure;
      this.error = reason;
      this.finish();
    }
    if (this.ended || this.bodyError !== null) return;
    this.cancelled = reason;
    this.controller?.abort(reason);
  }

  /** Send the body (held bytes first) to `sink`; a body already over is reported at once. */
  attach(sink: BodySink): void {
    this.sink = sink;
    const held = this.held;
    this.held = null;
    if (held !== null) for (const chunk of held) sink.write(chunk, this.resumeFn);
    if (this.bodyError !== null) sink.fail(this.bodyError);
    else if (this.ended) sink.end();
    else if (this.heldBytes >= HOLD_BYTES) this.resumeFn();
  }

  private finish(): void {
    const settle = this.settle;
    this.settle = null;
    settle?.(this);
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}

/** A sink that throws the body away, keeping the connection for reuse unless it is large. */
export class DiscardSink implements BodySink {
  private bytes = 0;
  constructor(
    private readonly attempt: Attempt,
    private readonly limitBytes = 256 * 1024, // 256 KiB, then the connection is closed instead
  ) {}

  write(chunk: Buffer): boolean {
    this.bytes += chunk.length;
    if (this.bytes > this.limitBytes) this.attempt.cancel('caller_gone', DISCARDED);
    return true;
  }

  end(): void {}
  fail(): void {}
}

const DISCARDED = new Error('answer discarded');

export interface HttpForwardDeps {
  readonly client: UpstreamClient;
  readonly clock: () => number;
  readonly logger: Logger;
}

/** HTTP forwarding as the failover core's transport: one undici dispatch per attempt. */
export function httpTransport(deps: HttpForwardDeps, call: ProxyCall): Transport<Attempt> {
  return new HttpTransport(deps, call);
}

/** One object per call, its methods on the prototype (no closures made per request). */
class HttpTransport implements Transport<Attempt> {
  constructor(
    private readonly deps: HttpForwardDeps,
    readonly call: ProxyCall,
  ) {}

  /** Send the call to one node; resolves with its head or why there is none. */
  attempt(node: ProxyNode, startedAt: number): Promise<Tried<Attempt>> {
    const deps = this.deps;
    const call = this.call;
    const { upstream, target, body } = call.parts;
    const cfg = upstream.config;
    return new Promise((resolve) => {
      const settle = (a: Attempt) => {
        if (a.failure === null) {
          const outcome = answerKind(upstream, a.status, a, deps.clock());
          resolve({ kind: 'answer', answer: a, outcome, startedAt: a.startedAt });
          return;
        }
        call.attemptOver();
        if (a.failure === 'caller_gone')
          return resolve({ kind: 'caller_gone', startedAt: a.startedAt, cancelled: body?.timedOut !== true });
        deps.logger.warn(
          {
            event: 'upstream_failed',
            upstream: upstream.name,
            node: node.id,
            kind: a.failure,
            err: a.error?.message,
            request_id: call.parts.input.requestId,
          },
          `${node.circuit}: ${a.failure}`,
        );
        resolve({ kind: a.failure, startedAt: a.startedAt });
      };
      const a = new Attempt(
        cfg.request_timeout_ms,
        settle,
        () => call.done || body?.sourceError != null,
        startedAt,
        deps.clock,
      );
      call.attempting(a);
      deps.client.dispatch(
        {
          origin: node.origin,
          path: node.basePath + target.path,
          method: call.parts.method,
          headers: call.parts.headers,
          body: body?.attempt() ?? null,
          bodyTimeoutMs: cfg.request_timeout_ms,
        },
        a,
      );
    });
  }

  replayable(): boolean {
    const body = this.call.parts.body;
    return body === null || body.replayable;
  }

  discard(attempt: Attempt): void {
    attempt.attach(new DiscardSink(attempt));
  }
}
