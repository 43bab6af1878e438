import type { Logger } from 'pino';
import type { Admission, Circuit } from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';
import type { BreakerService, Clock as ServiceClock } from '../service/breaker-service.js';
import { isAvailable, panicHolds, wouldRefuse } from './guard-rails.js';
import type { ProxyHooks } from './proxy-call.js';
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

/**
 * Add the marker fields of every node answer to a flat list: which node, which DC, whether
 * it is degraded (outside the local DC, or `panic`), and, detect-only, whether the node's
 * rules would have refused the call (docs/proxy.md#guard-rails-ejection-cap-panic-detect-only).
 */
export function pushNodeMarkers(headers: string[], node: ProxyNode, use: NodeUse): void {
  headers.push('x-node', node.id, 'x-dc', node.dc, 'x-degraded', degraded(node, use));
  if (use.wouldRefuse) headers.push('x-circuit-would-refuse', 'true');
}

/** The node markers as raw head lines (for a head written on a socket). */
export function nodeMarkerLines(node: ProxyNode, use: NodeUse): string {
  const refuse = use.wouldRefuse ? 'x-circuit-would-refuse: true\r\n' : '';
  return `x-node: ${node.id}\r\nx-dc: ${node.dc}\r\nx-degraded: ${degraded(node, use)}\r\n${refuse}`;
}

function degraded(node: ProxyNode, use: NodeUse): string {
  if (use.panic) return 'panic';
  return node.local ? 'false' : 'true';
}

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

/**
 * How old a reading of the nodes may be before the next request reads them again (100 ms):
 * a handful of cached reads per upstream ten times a second, never one per request. A node
 * seen refusing a call makes the next request read at once.
 */
export const PANIC_RECHECK_MS = 100;
/** While in panic, the nodes are read this often even without traffic, so that the gauge and the log see it end (1 s). */
export const PANIC_IDLE_RECHECK_MS = 1_000;

/** Told when an upstream enters or leaves panic: the nodes available of all at that reading. */
export type PanicListener = (upstream: Upstream, panic: boolean, available: number) => void;

/**
 * Whether one upstream is in panic (`panic_threshold_percent`): fewer than that share of
 * its nodes available (guard-rails.ts `isAvailable`). Each worker reads the shared node
 * circuits itself, so every worker comes to the same answer within PANIC_RECHECK_MS.
 */
export class PanicWatch {
  private panic = false;
  private readAt = -Infinity;
  private reading = false;
  private idleTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly upstream: Upstream,
    private readonly breaker: BreakerService,
    private readonly clock: ServiceClock,
    private readonly onChange: PanicListener,
  ) {}

  /** Panic as of the last reading (read again when older than PANIC_RECHECK_MS). Always false with the threshold at 0. */
  holds(): boolean {
    if (this.upstream.config.panic_threshold_percent === 0) return false;
    const now = this.clock();
    if (now - this.readAt >= PANIC_RECHECK_MS) this.read(now);
    return this.panic;
  }

  /** A node refused a call: the next `holds` reads the nodes again. */
  stale(): void {
    this.readAt = -Infinity;
  }

  /** The node circuits from memory when the store holds them all (SQLite; Redis' cache), else read from the store. */
  private read(now: number): void {
    if (this.reading) return; // a reading from the shared store is on its way
    this.readAt = now;
    const peeked = this.upstream.nodes.map((n) => this.breaker.peekCircuit(n.circuit));
    if (!peeked.includes(undefined)) {
      this.judge(peeked as (Circuit | null)[]);
      return;
    }
    this.reading = true;
    Promise.all(this.upstream.nodes.map((n) => this.breaker.get(n.circuit))).then(
      (circuits) => {
        this.reading = false;
        this.judge(circuits);
      },
      () => {
        this.reading = false; // unreachable store: keep the last reading
      },
    );
  }

  private judge(circuits: readonly (Circuit | null)[]): void {
    const now = this.clock();
    const available = circuits.filter((c) => isAvailable(c, now)).length;
    const panic = panicHolds(available, circuits.length, this.upstream.config.panic_threshold_percent);
    if (panic === this.panic) return;
    this.panic = panic;
    if (panic) {
      this.idleTimer = setInterval(() => this.read(this.clock()), PANIC_IDLE_RECHECK_MS);
      this.idleTimer.unref();
    } else if (this.idleTimer !== null) {
      clearInterval(this.idleTimer);
      this.idleTimer = null;
    }
    this.onChange(this.upstream, panic, available);
  }
}

/**
 * Every upstream's PanicWatch, one per process (the HTTP and the WebSocket path share them);
 * only upstreams with a `panic_threshold_percent` have one.
 */
export class PanicWatches {
  private readonly watches = new Map<Upstream, PanicWatch>();

  constructor(upstreams: Iterable<Upstream>, breaker: BreakerService, clock: ServiceClock, onChange: PanicListener) {
    for (const u of upstreams) {
      if (u.config.panic_threshold_percent === 0) continue;
      this.watches.set(u, new PanicWatch(u, breaker, clock, onChange));
    }
  }

  of(upstream: Upstream): PanicWatch | undefined {
    return this.watches.get(upstream);
  }
}

/** The listener that logs panic's start and end (`panic_entered` / `panic_left`) and sets the gauge; the gauge starts at 0. */
export function reportPanic(
  logger: Logger,
  hooks: ProxyHooks | undefined,
  upstreams: Iterable<Upstream>,
): PanicListener {
  for (const u of upstreams) if (u.config.panic_threshold_percent > 0) hooks?.proxyPanic?.(u.name, false);
  return (upstream, panic, available) => {
    const nodes = upstream.nodes.length;
    const fields = {
      event: panic ? 'panic_entered' : 'panic_left',
      upstream: upstream.name,
      available,
      nodes,
      threshold_percent: upstream.config.panic_threshold_percent,
    };
    const message = panic
      ? `${upstream.name}: panic, ${available} of ${nodes} nodes available: node breakers not honoured`
      : `${upstream.name}: panic over, ${available} of ${nodes} nodes available`;
    logger.warn(fields, message);
    hooks?.proxyPanic?.(upstream.name, panic);
  };
}

const PANIC_JUDGED: NodeUse = Object.freeze({ judged: true, panic: true, wouldRefuse: false });
const PANIC_UNJUDGED: NodeUse = Object.freeze({ judged: false, panic: true, wouldRefuse: false });
const inPanic = (node: ProxyNode, a: Admission | null): Pick => ({
  node,
  use: a === null || a.verdict.allowed ? PANIC_JUDGED : PANIC_UNJUDGED,
});

/**
 * In panic: the next node not yet tried, local DC first, round-robin inside each DC, its
 * breaker not honoured. The breaker is still asked, so a node that admits the call (closed,
 * or a half-open probe) is judged by its outcome as always; a node whose breaker refuses is
 * used without being judged (its outcome says nothing the detector does not already hold).
 */
export async function pickInPanic(
  upstream: Upstream,
  breaker: BreakerService,
  tried: ReadonlySet<ProxyNode> | null,
): Promise<Pick | null> {
  for (let g = 0; g < upstream.groups.length; g++) {
    const group = upstream.groups[g]!;
    const start = upstream.cursors[g]!;
    for (let k = 0; k < group.length; k++) {
      const node = group[(start + k) % group.length]!;
      if (tried?.has(node)) continue;
      upstream.cursors[g] = (start + k + 1) % group.length;
      try {
        const caller = upstream.recordOptions.caller;
        return inPanic(
          node,
          breaker.peekAllowed(node.circuit, caller) ?? (await breaker.allowed(node.circuit, caller)),
        );
      } catch {
        return { node, use: PANIC_UNJUDGED }; // the store is down: used unguarded, as fail-open does
      }
    }
  }
  return null;
}
