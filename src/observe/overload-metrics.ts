import { Counter, Gauge, type Registry } from 'prom-client';
import type { ShedReason } from '../proxy/overload/concurrency-gate.js';
import type { UpstreamConcurrency } from '../proxy/proxy-hooks.js';

/**
 * The proxy's overload-control series (issue 21): refusals and retries counted as they
 * happen; each upstream's limit and requests in flight read from the proxy at scrape time
 * (so nothing is written on the hot path), summed over workers like every series here.
 */
export class OverloadMetrics {
  private readonly shed;
  private readonly retries;
  private read: () => readonly UpstreamConcurrency[] = () => [];

  constructor(registers: Registry[]) {
    this.shed = new Counter({
      name: 'circuitlog_proxy_shed_total',
      help: 'Proxied requests refused a concurrency slot',
      labelNames: ['upstream', 'reason'],
      registers,
    });
    this.retries = new Counter({
      name: 'circuitlog_proxy_retries_total',
      help: 'Retries on another node, sent or refused by the retry budget',
      labelNames: ['upstream', 'result'],
      registers,
    });
    const read = () => this.read();
    new Gauge({
      name: 'circuitlog_proxy_concurrency_limit',
      help: "The upstream's concurrency limit now (fixed or adaptive)",
      labelNames: ['upstream'],
      registers,
      collect() {
        this.reset();
        for (const u of read()) if (u.limit !== null) this.set({ upstream: u.upstream }, u.limit);
      },
    });
    new Gauge({
      name: 'circuitlog_proxy_in_flight',
      help: 'Proxied requests (and WebSocket tunnels) holding a concurrency slot',
      labelNames: ['upstream'],
      registers,
      collect() {
        this.reset();
        for (const u of read()) this.set({ upstream: u.upstream }, u.inFlight);
      },
    });
  }

  shedOne(upstream: string, reason: ShedReason): void {
    this.shed.inc({ upstream, reason });
  }

  retry(upstream: string, result: 'sent' | 'budget_exhausted'): void {
    this.retries.inc({ upstream, result });
  }

  watch(read: () => readonly UpstreamConcurrency[]): void {
    this.read = read;
  }
}
