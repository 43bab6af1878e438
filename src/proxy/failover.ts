import type { BreakerService, Clock } from '../service/breaker-service.js';
import { NodePick, type NodeUse, type PanicWatches, type Pick, pickInPanic } from './node-picker.js';
import type { ProxyCall } from './proxy-call.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/** Methods that may be replayed on another node after reaching one (RFC 9110 section 9.2.2). */
export const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** How one try of one node ended; `A` is the transport's answer (an HTTP head, a WebSocket handshake answer). */
export type Tried<A> =
  | { readonly kind: 'answer'; readonly answer: A; readonly failed: boolean; readonly startedAt: number }
  | { readonly kind: 'timeout' | 'unreachable' | 'refused'; readonly startedAt: number }
  | { readonly kind: 'caller_gone' };

/** One transport's side of the failover: HTTP forwarding (attempt.ts) or the WebSocket handshake (ws-handshake.ts). */
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
 * How the failover ended. `answer` with `failed` false is the node's to judge (its success
 * is recorded on the call once the answer is over) when `use.judged`; `use` also carries the marks for the answer's head.
 */
export type Ending<A> =
  | {
      readonly kind: 'answer';
      readonly node: ProxyNode;
      readonly answer: A;
      readonly failed: boolean;
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
 * unreachable, refused, a status in `failure_statuses`) is recorded against the node and,
 * for an idempotent method within `retries` and the upstream's retry budget (`retry_budget`,
 * overload/upstream-overload.ts), the next node is tried. A refused
 * connection sent nothing, so any method moves on, outside the budget. When no node is
 * left, the last failing answer goes back as sent, or the last failure is the ending.
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
    if (tr.kind === 'caller_gone') return tr;
    if (tr.kind === 'answer' && !tr.failed)
      return { kind: 'answer', node, answer: tr.answer, failed: false, startedAt: tr.startedAt, use };
    if (use.judged) call.record(node, false, tr.startedAt);
    (tried ??= new Set()).add(node);
    last =
      tr.kind === 'answer'
        ? { kind: 'answer', node, answer: tr.answer, failed: true, startedAt: tr.startedAt, use }
        : { kind: tr.kind === 'timeout' ? 'timeout' : 'unreachable' };
    const replayable = t.replayable();
    if (tr.kind === 'refused' && replayable) continue; // nothing was sent: free to move on
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
