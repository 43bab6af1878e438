import { AppError } from '../domain/errors.js';
import type { Admission } from '../domain/circuit.js';
import type { BreakerService } from '../service/breaker-service.js';
import { wouldRefuse } from './guard-rails.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/**
 * How a picked node is used. `judged`: its outcome goes to its breaker (not so for a node
 * used in panic against its breaker); `panic`: picked while its upstream is in panic
 * (`X-Degraded: panic`); `wouldRefuse`: forced closed while its rules would refuse
 * (detect-only: `X-Circuit-Would-Refuse: true`).
 */
export interface NodeUse {
  readonly judged: boolean;
  readonly panic: boolean;
  readonly wouldRefuse: boolean;
}

/** The common use: judged, no marks (one object, no allocation per pick). */
export const PLAIN_USE: NodeUse = Object.freeze({ judged: true, panic: false, wouldRefuse: false });
const WOULD_REFUSE_USE: NodeUse = Object.freeze({ judged: true, panic: false, wouldRefuse: true });

/** What the walk reads the time from (the breaker service's injected clock), only when a force needs judging. */
interface Clock {
  now(): number;
}

export type Pick =
  | { readonly node: ProxyNode; readonly use: NodeUse }
  | { readonly node: null; readonly retryAt: number | null };

/** The use of a node whose breaker admitted the call: marked when only a force let it through. */
function admittedUse(admission: Admission | null, clock: Clock): NodeUse {
  if (admission?.circuit?.forcedState !== 'closed') return PLAIN_USE; // (a test's stand-in admission may carry no circuit)
  // The domain's verdict also knows the caller's own isolation (a quorum policy) under the force.
  if (admission.verdict.allowed && admission.verdict.wouldRefuse !== undefined) return WOULD_REFUSE_USE;
  return wouldRefuse(admission.circuit, clock.now()) ? WOULD_REFUSE_USE : PLAIN_USE;
}

/**
 * The one walk over an upstream's nodes: the first group (local DC first) with a node whose
 * circuit admits a call, round-robin inside the group, skipping `tried`. It yields each
 * candidate and is sent that node's admission, so only the chosen node's circuit is
 * admitted (a half-open node's probe slot is taken only when it is used).
 */
function* walk(
  upstream: Upstream,
  tried: ReadonlySet<ProxyNode> | null,
  clock: Clock,
): Generator<ProxyNode, Pick, Admission | null> {
  let retryAt = Infinity;
  for (let g = 0; g < upstream.groups.length; g++) {
    const group = upstream.groups[g]!;
    const start = upstream.cursors[g]!;
    upstream.cursors[g] = (start + 1) % group.length;
    for (let k = 0; k < group.length; k++) {
      const node = group[(start + k) % group.length]!;
      if (tried?.has(node)) continue;
      const admission = yield node;
      if (admission === null || admission.verdict.allowed) return { node, use: admittedUse(admission, clock) };
      retryAt = Math.min(retryAt, admission.verdict.retryAt);
    }
  }
  return { node: null, retryAt: Number.isFinite(retryAt) ? retryAt : null };
}

/**
 * Choosing the next node for one attempt. The service's checks are answered at once when
 * the store can (SQLite always; Redis from its cache: the closed-circuit fast path), so
 * `now()` is a synchronous peek (`peekAllowed`); a check that needs a write or the shared
 * store (a probe slot, a Redis cache miss) makes it answer null,
 * and `later()` finishes the same walk asynchronously. This is the one place in the proxy
 * that meets the service's value-or-promise answers.
 */
export class NodePick {
  private readonly steps: Generator<ProxyNode, Pick, Admission | null>;
  private pending: Promise<Admission | null> | null = null;
  private candidate: ProxyNode | null = null;
  /** Config `instance_id`: the proxy asks as its caller, so its own isolation from a node (a quorum policy) is honoured. */
  private readonly caller: string | undefined;

  constructor(
    upstream: Upstream,
    tried: ReadonlySet<ProxyNode> | null,
    private readonly breaker: BreakerService,
    /** On a storage outage, a local node is used without its breaker. */
    private readonly failOpen: boolean,
  ) {
    this.steps = walk(upstream, tried, breaker);
    this.caller = upstream.recordOptions.caller;
  }

  /** The pick, when every check it took was answered at once; else null (then await `later()`). */
  now(): Pick | null {
    let step = this.steps.next();
    while (!step.done) {
      const admission = this.breaker.peekAllowed(step.value.circuit, this.caller);
      if (admission === undefined) {
        this.pending = this.breaker.allowed(step.value.circuit, this.caller);
        this.candidate = step.value;
        return null;
      }
      step = this.steps.next(admission);
    }
    return step.value;
  }

  /** The rest of the walk `now()` left, awaiting each check. */
  async later(): Promise<Pick> {
    let node = this.candidate!;
    let pending: Promise<Admission | null> | null = this.pending;
    for (;;) {
      let admission: Admission | null;
      try {
        admission = await (pending ?? this.breaker.allowed(node.circuit, this.caller));
      } catch (error) {
        // The store is unreachable (STORAGE_UNAVAILABLE): fail open to a local node, or refuse.
        if (this.failOpen && node.local && error instanceof AppError && error.code === 'STORAGE_UNAVAILABLE')
          return { node, use: PLAIN_USE };
        throw error;
      }
      pending = null;
      const step = this.steps.next(admission);
      if (step.done) return step.value;
      node = step.value;
    }
  }
}
