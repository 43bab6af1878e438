import { VegasLimit, type Sample, type VegasSettings } from './vegas-limit.js';

/** An upstream's `concurrency` block, as the config parser hands it on. */
export type ConcurrencySettings =
  | { readonly limit: 'fixed'; readonly max: number; readonly queueMs: number; readonly maxQueue: number }
  | ({ readonly limit: 'adaptive'; readonly queueMs: number; readonly maxQueue: number } & VegasSettings);

/** Why a request was refused a slot: the `reason` label of circuitlog_proxy_shed_total. */
export type ShedReason = 'limit' | 'queue_full' | 'queue_timeout';

/**
 * How an admitted request ended, for the adaptive limit: `answered` (a node's head arrived,
 * whatever its status), `dropped` (the node did not answer in time: a loss, for Vegas), or
 * `unjudged` (no word on the upstream's latency: the caller left, no node was reachable).
 */
export type Ending = 'answered' | 'dropped' | 'unjudged';

/** A slot: its latency observed at most once, released exactly once. */
export interface Permit {
  readonly sample: Sample;
  observed: boolean;
  released: boolean;
}

interface Waiter {
  readonly grant: (permit: Permit | ShedReason | 'cancelled') => void;
  timer: NodeJS.Timeout | null;
}

/**
 * Admission to one upstream: at most `limit` requests in flight (fixed, or adaptive after
 * Vegas). A request over it is refused at once, or with `queueMs` > 0 waits for a slot, oldest
 * first, in a queue of at most `maxQueue` (a count bound: a waiter holds only its request
 * head, whose size the server bounds). `clock` is the injected clock in ms.
 */
export class ConcurrencyGate {
  private inFlightCount = 0;
  private readonly waiters: Waiter[] = [];
  private readonly adaptive: VegasLimit | null;

  constructor(
    readonly settings: ConcurrencySettings,
    private readonly clock: () => number,
    /** Called when the limit changes (for the gauge). */
    private readonly onLimit: (limit: number) => void = () => {},
    /** This process's callback delay (ms) since the last call, for the adaptive limit (loop-lag.ts). */
    lagMs?: () => number,
  ) {
    this.adaptive = settings.limit === 'adaptive' ? new VegasLimit(settings, clock(), lagMs) : null;
  }

  get limit(): number {
    return this.adaptive?.limit ?? (this.settings as { max: number }).max;
  }

  get inFlight(): number {
    return this.inFlightCount;
  }

  get queued(): number {
    return this.waiters.length;
  }

  /** The no-load latency the adaptive limit measured (ms); null for a fixed limit or before the first window. */
  get noLoadMs(): number | null {
    return this.adaptive?.noLoad ?? null;
  }

  /** A slot now, or null when `limit` are in flight (or others wait before us). */
  tryAcquire(): Permit | null {
    if (this.waiters.length === 0) {
      if (this.inFlightCount < this.limit) return this.take();
      if (this.adaptive?.grow()) {
        this.onLimit(this.limit);
        return this.take();
      }
    }
    this.adaptive?.refused();
    return null;
  }

  /**
   * Wait up to `queueMs` for a slot. Resolves with the permit, or the reason it was refused;
   * `cancel` (the caller hung up) leaves the queue ('cancelled'). Only after `tryAcquire` returned null.
   */
  wait(): { readonly result: Promise<Permit | ShedReason | 'cancelled'>; readonly cancel: () => void } {
    if (this.settings.queueMs === 0) return { result: Promise.resolve('limit'), cancel: noop };
    if (this.waiters.length >= this.settings.maxQueue) return { result: Promise.resolve('queue_full'), cancel: noop };
    let waiter!: Waiter;
    const result = new Promise<Permit | ShedReason | 'cancelled'>((resolve) => {
      waiter = { grant: resolve, timer: null };
    });
    waiter.timer = setTimeout(() => this.leave(waiter, 'queue_timeout'), this.settings.queueMs);
    waiter.timer.unref?.();
    this.waiters.push(waiter);
    return { result, cancel: () => this.leave(waiter, 'cancelled') };
  }

  /**
   * The request's answer (its head) arrived, or it ended without one: its latency since the
   * slot was taken is a sample of the adaptive limit. Only the first call counts.
   */
  observe(permit: Permit, ending: Ending): void {
    if (permit.observed) return;
    permit.observed = true;
    if (this.adaptive === null || ending === 'unjudged') return;
    if (this.adaptive.answered(permit.sample, this.clock(), ending === 'dropped')) {
      this.onLimit(this.limit);
      this.admitWaiters(); // the limit may have grown
    }
  }

  /** The request is over (its answer streamed, or it failed): the slot goes to the oldest waiter, if any. */
  release(permit: Permit): void {
    if (permit.released) return;
    permit.released = true;
    this.inFlightCount--;
    this.admitWaiters();
  }

  private take(): Permit {
    this.inFlightCount++;
    const now = this.clock();
    return {
      sample: this.adaptive?.sent(now, this.inFlightCount) ?? {
        startedAt: now,
        inFlight: this.inFlightCount,
        probe: 0,
      },
      observed: false,
      released: false,
    };
  }

  private admitWaiters(): void {
    while (this.waiters.length > 0 && this.inFlightCount < this.limit) {
      const waiter = this.waiters.shift()!;
      if (waiter.timer !== null) clearTimeout(waiter.timer);
      waiter.grant(this.take());
    }
  }

  private leave(waiter: Waiter, reason: ShedReason | 'cancelled'): void {
    const i = this.waiters.indexOf(waiter);
    if (i === -1) return;
    this.waiters.splice(i, 1);
    if (waiter.timer !== null) clearTimeout(waiter.timer);
    waiter.grant(reason);
  }
}

function noop(): void {}
