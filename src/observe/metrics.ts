import { Registry, collectDefaultMetrics } from 'prom-client';
import type { Circuit, Transition } from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import type { ProxyHooks } from '../proxy/proxy-hooks.js';
import type { BreakerObserver } from '../service/breaker-observer.js';
import type { CapCutoff, SnapshotReader } from '../store/snapshot-reader.js';
import { isSlow } from '../domain/window.js';
import { GaugeRenderer } from './gauge-renderer.js';
import { circuitInstruments, proxyInstruments } from './metric-instruments.js';
import type { ShedReason } from '../proxy/overload/concurrency-gate.js';
import type { UpstreamConcurrency } from '../proxy/proxy-hooks.js';

export interface MetricsOptions {
  readonly snapshot: SnapshotReader;
  /** Circuits with per-circuit series: the first this many by creation (config `metrics.max_circuits`). */
  readonly maxCircuits: number;
  readonly clock: () => number;
}

const CUTOFF_REFRESH_MS = 10_000; // 10 s: a deleted circuit lets a later one into the cap within this

/**
 * The Prometheus registry. Counters and histograms live in this process (summed across
 * workers by the primary); state gauges are read from the database at each scrape, so
 * every worker and every scrape agree and a gauge never reads N with N workers.
 */
export class Metrics implements BreakerObserver, ProxyHooks {
  /** Counters, histograms and prom-client's default process metrics. */
  readonly counters = new Registry();
  private readonly transitions;
  private readonly detectOnly;
  private readonly outcomes;
  private readonly slowCalls;
  private readonly rejections;
  private readonly outcomeDuration;
  private readonly proxyRequests;
  private readonly proxyDuration;
  private readonly fallbacks;
  private readonly healthChecks;
  private readonly degraded;
  private readonly coalesced;
  private readonly sendTimeouts;
  private readonly overload;
  private readonly panic;
  private readonly gauges: GaugeRenderer;
  /** The end of the `max_circuits` cap, read at most every CUTOFF_REFRESH_MS (or when a newer circuit appears below it). */
  private cutoff: (CapCutoff & { readonly readAt: number }) | undefined;
  /**
   * In a cluster worker: the counters summed over every worker (asked of the primary).
   * Unset in a single process, where this process's counters are the whole truth.
   */
  clusterCounters: (() => Promise<string>) | undefined;

  constructor(private readonly options: MetricsOptions) {
    this.gauges = new GaugeRenderer(options.snapshot, options.maxCircuits, options.clock);
    const registers = [this.counters];
    collectDefaultMetrics({ register: this.counters });
    const circuit = circuitInstruments(registers);
    this.transitions = circuit.transitions;
    this.detectOnly = circuit.detectOnly;
    this.outcomes = circuit.outcomes;
    this.slowCalls = circuit.slowCalls;
    this.rejections = circuit.rejections;
    this.outcomeDuration = circuit.outcomeDuration;
    const proxy = proxyInstruments(registers);
    this.proxyRequests = proxy.proxyRequests;
    this.proxyDuration = proxy.proxyDuration;
    this.fallbacks = proxy.fallbacks;
    this.degraded = proxy.degraded;
    this.overload = proxy.overload;
    this.coalesced = proxy.coalesced;
    this.sendTimeouts = proxy.sendTimeouts;
    this.healthChecks = proxy.healthChecks;
    this.panic = proxy.panic;
  }

  transition(circuit: Circuit, t: Transition): void {
    if (!this.isLabelled(circuit)) return;
    // Detect-only events are counted apart: a dashboard shows what a policy would have done before it is enforced.
    (t.forcedState === 'closed' ? this.detectOnly : this.transitions).inc({
      circuit: circuit.name,
      from: t.from,
      to: t.to,
      reason: t.reason,
    });
  }

  outcome(circuit: Circuit, success: boolean, durationMs: number | undefined): void {
    if (!this.isLabelled(circuit)) return;
    const outcome = success ? 'success' : 'failure';
    // Keys: label values joined by NUL (a character a label value here never holds); the
    // labels object is made only for a series' first count.
    const key = `${circuit.name}\0${outcome}`;
    if (!this.outcomes.incKnown(key)) this.outcomes.inc(key, { circuit: circuit.name, outcome });
    if (durationMs === undefined) return;
    const seconds = durationMs / 1000;
    if (!this.outcomeDuration.observeKnown(circuit.name, seconds))
      this.outcomeDuration.observe(circuit.name, { circuit: circuit.name }, seconds);
    if (circuit.window !== null && isSlow(circuit.window, durationMs)) this.slowCalls.inc({ circuit: circuit.name });
  }

  rejected(circuit: Circuit): void {
    if (this.isLabelled(circuit)) this.rejections.inc({ circuit: circuit.name });
  }

  proxyRequest(
    upstream: string,
    node: { readonly id: string; readonly dc: string; readonly local: boolean } | null,
    status: number,
    durationMs: number,
  ): void {
    const nodeId = node?.id ?? 'none';
    if (node?.local === false) this.degraded.inc({ upstream });
    const dc = node?.dc ?? 'none';
    const key = `${upstream}\0${nodeId}\0${dc}\0${status}`;
    if (!this.proxyRequests.incKnown(key))
      this.proxyRequests.inc(key, { upstream, node: nodeId, dc, status: String(status) });
    const seriesKey = `${upstream}\0${nodeId}`;
    const seconds = durationMs / 1000;
    if (!this.proxyDuration.observeKnown(seriesKey, seconds))
      this.proxyDuration.observe(seriesKey, { upstream, node: nodeId }, seconds);
  }

  proxyError(upstream: string, error: unknown, durationMs: number): void {
    const status = error instanceof AppError ? PROBLEMS[error.code].status : 500;
    this.proxyRequest(upstream, null, status, durationMs);
  }

  proxyFallback(upstream: string, kind: 'stale' | 'static'): void {
    this.fallbacks.inc({ upstream, kind });
    this.degraded.inc({ upstream });
  }

  /** The proxy's `onCoalesced` hook (an arrow: it is passed around unbound). */
  readonly proxyCoalesced = (upstream: string): void => {
    this.coalesced.inc({ upstream });
  };

  proxyShed(upstream: string, reason: ShedReason): void {
    this.overload.shedOne(upstream, reason);
  }

  proxyRetry(upstream: string, result: 'sent' | 'budget_exhausted'): void {
    this.overload.retry(upstream, result);
  }

  proxySendTimeout(upstream: string): void {
    this.sendTimeouts.inc({ upstream });
  }

  proxyConcurrency(read: () => readonly UpstreamConcurrency[]): void {
    this.overload.watch(read);
  }

  proxyPanic(upstream: string, panic: boolean): void {
    this.panic.set({ upstream }, panic ? 1 : 0);
  }

  healthCheck(upstream: string, node: string, result: 'success' | 'failure'): void {
    this.healthChecks.inc({ upstream, node, result });
  }

  /** The whole exposition: gauges from the database, then counters (cluster-wide when clustered). */
  async render(): Promise<string> {
    const gauges = this.gauges.render();
    const counters = this.clusterCounters ? await this.clusterCounters() : await this.counters.metrics();
    return `${gauges}${counters}`;
  }

  get contentType(): string {
    return this.counters.contentType;
  }

  /**
   * Is the circuit among the first `maxCircuits` by creation? The same rule as the gauges,
   * so every worker labels the same circuits. One comparison with the cap's last id: ids
   * only grow, so a circuit inside stays inside; deleting circuits moves the end up, which
   * the next read (within CUTOFF_REFRESH_MS) sees.
   */
  private isLabelled(circuit: Circuit): boolean {
    const now = this.options.clock();
    const cached = this.cutoff;
    const cut = cached === undefined || now - cached.readAt > CUTOFF_REFRESH_MS ? this.readCutoff(now) : cached;
    if (circuit.id <= cut.lastId) return true;
    if (cut.full) return false;
    // Fewer circuits than the cap when last read, and this one is newer: it may be inside.
    return circuit.id <= this.readCutoff(now).lastId;
  }

  private readCutoff(now: number): CapCutoff {
    const cut = this.options.snapshot.capCutoff(this.options.maxCircuits);
    this.cutoff = { ...cut, readAt: now };
    return cut;
  }
}
