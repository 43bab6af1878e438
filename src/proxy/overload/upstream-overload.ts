import {
  ConcurrencyGate,
  type ConcurrencySettings,
  type Ending,
  type Permit,
  type ShedReason,
} from './concurrency-gate.js';
import { loopLagReader } from './loop-lag.js';
import { RetryBudget, type RetryBudgetSettings } from './retry-budget.js';

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
