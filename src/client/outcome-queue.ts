/**
 * Outcomes on their way to `POST /outcomes`: batched (a flush after `flushDelayMs` or at
 * `flushAt` items, at most `maxBatch` per request), one batch in flight at a time so they arrive in the order recorded,
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
  readonly flushDelayMs: number;
  readonly capacity: number;
  /** Delay before the `attempt`-th retry of a batch that could not be delivered. */
  readonly retryDelayMs: (attempt: number) => number;
}

export interface OutcomeQueueHooks {
  send(batch: readonly OutcomeItem[]): Promise<void>;
  /** A batch was delivered: circuitlog is reachable. */
  onDelivered(): void;
  /** A batch could not be delivered; it stays queued and is retried. */
  onUnreachable(error: TransportError): void;
  /** circuitlog refused a batch with a 4xx: retrying cannot help, so it is dropped (counted). */
  onRejected(count: number, error: TransportError): void;
}

export interface QueueCounts {
  readonly acknowledged: number;
  readonly dropped: number;
  readonly rejected: number;
}

export class OutcomeQueue {
  private items: OutcomeItem[] = [];
  private inFlight = 0;
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
    if (this.inFlight > 0 || this.flushTimer !== null) return;
    if (this.items.length >= this.options.flushAt) this.flush();
    else this.flushTimer = setTimeout(() => this.flush(), this.options.flushDelayMs);
  }

  /** Send now (for example after a reconnect), rather than at the next timer. */
  flush(): void {
    if (this.flushTimer !== null) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    if (this.inFlight > 0 || this.items.length === 0) return;
    const batch = this.items.splice(0, this.options.maxBatch);
    this.inFlight = batch.length;
    this.wakeSpaceWaiters();
    this.hooks.send(batch).then(
      () => this.delivered(batch.length),
      (error: unknown) => this.failed(batch, error),
    );
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
    this.flushTimer = null;
  }

  private delivered(count: number): void {
    this.inFlight = 0;
    this.retryAttempt = 0;
    this.counts.acknowledged += count;
    this.hooks.onDelivered();
    this.afterBatch();
  }

  private failed(batch: OutcomeItem[], error: unknown): void {
    this.inFlight = 0;
    const err = error instanceof TransportError ? error : new TransportError('unreachable', String(error), undefined, undefined, { cause: error });
    if (err.kind === 'rejected') {
      this.counts.rejected += batch.length;
      this.hooks.onRejected(batch.length, err);
      this.afterBatch();
      return;
    }
    // Not delivered: back to the front, in order, and try again later.
    this.items.unshift(...batch);
    this.hooks.onUnreachable(err);
    this.flushTimer = setTimeout(() => this.flush(), this.options.retryDelayMs(this.retryAttempt++));
  }

  private afterBatch(): void {
    this.wakeSpaceWaiters();
    if (this.items.length > 0) this.flush();
    else if (this.pending === 0) for (const resolve of this.drainWaiters.splice(0)) resolve();
  }

  private wakeSpaceWaiters(): void {
    while (this.spaceWaiters.length > 0 && !this.full) this.spaceWaiters.shift()!();
  }
}
