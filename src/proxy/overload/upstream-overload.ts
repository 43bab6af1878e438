import {
  ConcurrencyGate,
  type ConcurrencySettings,
  type Ending,
  type Permit,
  type ShedReason,
} from './concurrency-gate.js';
import { loopLagReader } from './loop-lag.js';

/**
 * A retry budget per upstream, as Finagle's `RetryBudget` and Linkerd's `retryBudget` define
 * it (https://twitter.github.io/finagle/guide/Clients.html#retries, https://linkerd.io/2/reference/retries/):
 * over the last 10 s, retries may be at most `percent` % of the requests plus a floor of
 * `minPerSecond` per second, so a failing upstream sees at most `1 + percent/100` times its
 * callers' traffic (plus the floor) however many nodes fail. Envoy's `retry_budget` bounds
 * retries in flight instead; the rate form needs no concurrency count and reads the same in
 * a dashboard. `now` is the injected clock (ms).
 */

export interface RetryBudgetSettings {
  /** Retries allowed as a share of requests, in percent (Envoy, Linkerd, Finagle: 20). */
  readonly percent: number;
  /** Retries per second allowed whatever the traffic (the floor for a quiet upstream). */
  readonly minPerSecond: number;
}

export const RETRY_BUDGET_WINDOW_MS = 10_000; // 10 s, Finagle's and Linkerd's ttl
const BUCKET_MS = 1_000;
const BUCKETS = RETRY_BUDGET_WINDOW_MS / BUCKET_MS;

/** Counts of requests and retries in 1 s buckets over the last 10 s. */
export class RetryBudget {
  private readonly requests = new Array<number>(BUCKETS).fill(0);
  private readonly retries = new Array<number>(BUCKETS).fill(0);
  /** The absolute bucket number (now / 1 s) of each slot. */
  private readonly epochs = new Array<number>(BUCKETS).fill(-1);
  /** The bucket number and slot of the last call: within one second the sweep below has nothing to clear. */
  private lastEpoch = Number.NaN;
  private lastSlot = 0;

  constructor(readonly settings: RetryBudgetSettings) {}

  /** A caller's request (its first attempt) was sent. */
  request(now: number): void {
    this.requests[this.slot(now)]!++;
  }

  /** True, and the retry counted, if one more retry stays within the budget; else false. */
  tryRetry(now: number): boolean {
    this.slot(now);
    const allowed =
      (this.settings.percent / 100) * sum(this.requests) + this.settings.minPerSecond * (RETRY_BUDGET_WINDOW_MS / 1000);
    if (sum(this.retries) + 1 > allowed) return false;
    this.retries[this.slot(now)]!++;
    return true;
  }

  /** The bucket for `now`, cleared if it last held an older second; older buckets are cleared too. */
  private slot(now: number): number {
    const epoch = Math.floor(now / BUCKET_MS);
    if (epoch === this.lastEpoch) return this.lastSlot; // every request of a second: no sweep
    for (let i = 0; i < BUCKETS; i++) {
      if (this.epochs[i]! <= epoch - BUCKETS) {
        this.requests[i] = 0;
        this.retries[i] = 0;
        this.epochs[i] = -1;
      }
    }
    const i = ((epoch % BUCKETS) + BUCKETS) % BUCKETS;
    if (this.epochs[i] !== epoch) {
      this.requests[i] = 0;
      this.retries[i] = 0;
      this.epochs[i] = epoch;
    }
    this.lastEpoch = epoch;
    this.lastSlot = i;
    return i;
  }
}

function sum(values: readonly number[]): number {
  let total = 0;
  for (const v of values) total += v;
  return total;
}

/** What overload control reports (metrics count these); optional. */
export interface OverloadHooks {
  /** A request refused a slot: circuitlog_proxy_shed_total{upstream, reason}. */
  shed(upstream: string, reason: ShedReason): void;
  /** A retry on another node, sent or refused by the budget: circuitlog_proxy_retries_total{upstream, result}. */
  retry(upstream: string, result: 'sent' | 'budget_exhausted'): void;
}

export const NO_OVERLOAD_HOOKS: OverloadHooks = { shed() {}, retry() {} };

/**
 * One upstream's overload control: its concurrency gate (null without `max_concurrent` or
 * `concurrency`) and its retry budget. `clock` is the injected clock (ms).
 */
export class UpstreamOverload {
  readonly gate: ConcurrencyGate | null;
  readonly budget: RetryBudget;
  hooks: OverloadHooks = NO_OVERLOAD_HOOKS;

  constructor(
    readonly upstream: string,
    concurrency: ConcurrencySettings | null,
    retryBudget: RetryBudgetSettings,
    private readonly clock: () => number,
  ) {
    // An adaptive limit reads its own process's callback delay off its latency samples.
    this.gate =
      concurrency === null
        ? null
        : new ConcurrencyGate(
            concurrency,
            clock,
            undefined,
            concurrency.limit === 'adaptive' ? loopLagReader() : undefined,
          );
    this.budget = new RetryBudget(retryBudget);
  }

  /** A slot now: a permit, null with no limit configured, or why not ('limit' when the request may wait: see `mayWait`). */
  tryAdmit(): Permit | null | 'limit' {
    if (this.gate === null) return null;
    return this.gate.tryAcquire() ?? 'limit';
  }

  /** True when a request over the limit waits (`queue_ms` > 0) instead of being refused at once. */
  get mayWait(): boolean {
    return this.gate !== null && this.gate.settings.queueMs > 0;
  }

  /** A request refused a slot: counted. */
  refused(reason: ShedReason): void {
    this.hooks.shed(this.upstream, reason);
  }

  observe(permit: Permit | null, ending: Ending): void {
    if (permit !== null) this.gate?.observe(permit, ending);
  }

  release(permit: Permit | null): void {
    if (permit !== null) this.gate?.release(permit);
  }

  /** A caller's request reached the failover (its first attempt): the budget's base. */
  requestSent(): void {
    this.budget.request(this.clock());
  }

  /** Whether one more retry on another node stays within the budget; counted either way. */
  retryAllowed(): boolean {
    const ok = this.budget.tryRetry(this.clock());
    this.hooks.retry(this.upstream, ok ? 'sent' : 'budget_exhausted');
    return ok;
  }
}
