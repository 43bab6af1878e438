/**
 * Outcomes on their way to `POST /outcomes`: batched (a flush after `flushDelayMs` or at
 * `flushAt` items, at most `maxBatch` per request), up to `maxInFlight` batches at once
 * (pipelined on one connection, so circuitlog takes them in the order recorded),
 * and never dropped while circuitlog is reachable: at `capacity` the caller waits for
 * space (backpressure). While it is unreachable the queue is a bounded buffer instead:
 * past `capacity` the oldest outcome is dropped and counted.
 */

import { TransportError, type OutcomeItem } from './transport.js';

export interface OutcomeQueueOptions {
  /** Queued outcomes that trigger a send at once, without waiting for `flushDelayMs`. */
  readonly flushAt: number;
  /** Most outcomes in one request (what piled up while the previous one was in flight). */
  readonly maxBatch: number;
  /** Batches sent before the first is answered: 2 keeps circuitlog busy while the next is built. */
  readonly maxInFlight: number;
  readonly flushDelayMs: number;
  readonly capacity: number;
  /** Delay before the `attempt`-th retry of a batch that could not be delivered. */
  readonly retryDelayMs: (attempt: number) => number;
  /**
   * Most distinct callers in one batch (circuitlog refuses a batch naming more than 100): the edge
   * agent relays many callers' outcomes; a client names only its own. Default: no bound.
   */
  readonly maxCallers?: number;
}

export interface OutcomeQueueHooks {
  send(batch: readonly OutcomeItem[]): Promise<void>;
  /** A batch was delivered: circuitlog is reachable. */
  onDelivered(): void;
  /** A batch could not be delivered; it stays queued and is retried. */
  onUnreachable(error: TransportError): void;
  /**
   * circuitlog refused outcomes that retrying cannot help: a batch answered with a 4xx, or the
   * items for circuits a full table refused (507); they are dropped (counted).
   */
  onRejected(count: number, error: TransportError): void;
}

/** A batch out: `failed` once it has come back undelivered (`refused`: only its refused items were dropped, resend the rest at once). */
interface Sending {
  batch: OutcomeItem[];
  failed: false | 'unreachable' | 'refused';
}

/** The circuits a `507` too-many-circuits names (`refused_circuits`); empty when it names none. */
function refusedCircuits(error: TransportError): Set<string> {
  const names = (error.problem as { refused_circuits?: unknown } | null)?.refused_circuits;
  return new Set(Array.isArray(names) ? names.filter((n): n is string => typeof n === 'string') : []);
}

export interface QueueCounts {
  readonly acknowledged: number;
  readonly dropped: number;
  readonly rejected: number;
}

export class OutcomeQueue {
  private items: OutcomeItem[] = [];
  /** Batches sent and not answered yet, oldest first. */
  private sending: Sending[] = [];
  private inFlight = 0; // outcomes in `sending`
  private retryTimer: NodeJS.Timeout | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private retryAttempt = 0;
  private spaceWaiters: (() => void)[] = [];
  private drainWaiters: (() => void)[] = [];
  private counts = { acknowledged: 0, dropped: 0, rejected: 0 };

  constructor(
    private readonly options: OutcomeQueueOptions,
    private readonly hooks: OutcomeQueueHooks,
  ) {}

  /** Outcomes not yet acknowledged by circuitlog (queued or in flight). */
  get pending(): number {
    return this.items.length + this.inFlight;
  }

  get full(): boolean {
    return this.items.length >= this.options.capacity;
  }

  stats(): QueueCounts {
    return { ...this.counts };
  }

  /** Resolves once there is room (call only when `full`). */
  waitForSpace(): Promise<void> {
    return new Promise((resolve) => this.spaceWaiters.push(resolve));
  }

  /**
   * Queue an outcome. `bounded` (circuitlog unreachable): when full, drop the oldest
   * instead of growing; otherwise the caller has waited for space first (backpressure).
   */
  push(item: OutcomeItem, bounded: boolean): void {
    while (bounded && this.items.length >= this.options.capacity) {
      this.items.shift();
      this.counts.dropped++;
    }
    this.items.push(item);
    // With a batch out already, the next goes only once it is full: few large batches.
    if (this.items.length >= (this.sending.length === 0 ? this.options.flushAt : this.options.maxBatch)) this.flush();
    else if (this.sending.length === 0 && this.flushTimer === null && this.retryTimer === null) {
      this.flushTimer = setTimeout(() => this.flush(), this.options.flushDelayMs);
    }
  }

  /** Send now (for example after a reconnect), rather than at the next timer. */
  flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.retryTimer !== null) {
      clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    // After a failure nothing new is sent until every batch in flight has come back.
    if (this.sending.some((s) => s.failed !== false)) return;
    while (
      this.sending.length < this.options.maxInFlight &&
      this.items.length > 0 &&
      (this.sending.length === 0 || this.items.length >= this.options.maxBatch)
    ) {
      const entry: Sending = { batch: this.items.splice(0, this.nextBatchLength()), failed: false };
      this.sending.push(entry);
      this.inFlight += entry.batch.length;
      this.hooks.send(entry.batch).then(
        () => this.delivered(entry),
        (error: unknown) => this.failed(entry, error),
      );
    }
    this.wakeSpaceWaiters();
  }

  /** Items in the next batch: at most `maxBatch`, and at most `maxCallers` distinct callers. */
  private nextBatchLength(): number {
    const max = Math.min(this.options.maxBatch, this.items.length);
    const limit = this.options.maxCallers;
    if (limit === undefined) return max;
    const seen = new Set<string>();
    for (let i = 0; i < max; i++) {
      const caller = this.items[i]!.caller;
      if (caller === undefined || seen.has(caller)) continue;
      if (seen.size === limit) return i;
      seen.add(caller);
    }
    return max;
  }

  /** Let every waiting caller go on (circuitlog became unreachable: the queue is a bounded buffer now). */
  releaseWaiters(): void {
    for (const resolve of this.spaceWaiters.splice(0)) resolve();
  }

  /** Resolves once every outcome queued so far has been acknowledged (or dropped). */
  drained(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Stop retrying; what is still queued stays counted in `pending`. */
  stop(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.flushTimer = null;
    this.retryTimer = null;
  }

  private delivered(entry: { readonly batch: OutcomeItem[] }): void {
    this.settle(entry);
    this.retryAttempt = 0;
    this.counts.acknowledged += entry.batch.length;
    this.hooks.onDelivered();
    this.afterBatch();
  }

  private failed(entry: Sending, error: unknown): void {
    const err =
      error instanceof TransportError
        ? error
        : new TransportError('unreachable', String(error), undefined, undefined, { cause: error });
    if (err.status === 507) {
      this.refused(entry, err);
      return;
    }
    if (err.kind === 'rejected') {
      this.settle(entry);
      this.counts.rejected += entry.batch.length;
      this.hooks.onRejected(entry.batch.length, err);
      this.afterBatch();
      return;
    }
    // Not delivered: once every batch in flight is back, the failed ones return to the
    // front in the order they were sent, and are tried again later.
    entry.failed = 'unreachable';
    this.hooks.onUnreachable(err);
    this.requeueFailed();
  }

  /**
   * A full circuit table (507) refused the items for the circuits it names: drop and count
   * them, and send the rest again at once (nothing of the batch was written). A 507 that names
   * none of the batch's circuits cannot succeed either: the whole batch is dropped. So every
   * 507 drops at least one item, and a batch ends recorded or dropped within its length of tries.
   */
  private refused(entry: Sending, err: TransportError): void {
    const refused = refusedCircuits(err);
    const rest = entry.batch.filter((item) => !refused.has(item.circuit));
    const namesNone = rest.length === entry.batch.length;
    const dropped = namesNone ? entry.batch.length : entry.batch.length - rest.length;
    this.counts.rejected += dropped;
    this.hooks.onRejected(dropped, err);
    if (dropped === entry.batch.length) {
      this.settle(entry);
      this.afterBatch();
      return;
    }
    this.inFlight -= dropped;
    entry.batch = rest;
    entry.failed = 'refused';
    this.requeueFailed();
  }

  /** When every batch still out has failed: back to the front, in the order sent; retry later. */
  private requeueFailed(): boolean {
    if (this.sending.length === 0 || this.sending.some((s) => s.failed === false)) return false;
    // Only refused items dropped (circuitlog is up and took nothing): the rest goes again at once.
    const now = this.sending.every((s) => s.failed === 'refused');
    this.items.unshift(...this.sending.flatMap((s) => s.batch));
    // Back from the wire, the batches count against `capacity` again: past it the oldest go
    // (counted), as while circuitlog is unreachable, so the queue never holds more than its bound.
    if (this.items.length > this.options.capacity) {
      const over = this.items.length - this.options.capacity;
      this.items.splice(0, over);
      this.counts.dropped += over;
    }
    this.sending = [];
    this.inFlight = 0;
    this.retryTimer = setTimeout(
      () => {
        this.retryTimer = null;
        this.flush();
      },
      now ? 0 : this.options.retryDelayMs(this.retryAttempt++),
    );
    return true;
  }

  private settle(entry: { readonly batch: OutcomeItem[] }): void {
    this.sending = this.sending.filter((s) => s !== entry);
    this.inFlight -= entry.batch.length;
  }

  private afterBatch(): void {
    this.wakeSpaceWaiters();
    if (this.requeueFailed()) return;
    if (this.items.length > 0) this.flush();
    else if (this.pending === 0) for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  private wakeSpaceWaiters(): void {
    while (this.spaceWaiters.length > 0 && !this.full) this.spaceWaiters.shift()!();
  }
}
