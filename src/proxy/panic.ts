import type { Logger } from 'pino';
import type { Admission, Circuit } from '../domain/circuit.js';
import type { BreakerService, Clock } from '../service/breaker-service.js';
import { isAvailable, panicHolds } from './guard-rails.js';
import type { NodeUse, Pick } from './node-picker.js';
import type { ProxyHooks } from './proxy-hooks.js';
import type { ProxyNode, Upstream } from './upstreams.js';

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
    private readonly clock: Clock,
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

  constructor(upstreams: Iterable<Upstream>, breaker: BreakerService, clock: Clock, onChange: PanicListener) {
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
