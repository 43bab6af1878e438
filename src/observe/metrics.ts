import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Circuit, Transition } from '../domain/circuit.js';
import type { OutcomeKind } from '../domain/outcome-kind.js';
import { AppError } from '../domain/errors.js';
import type { RefusalReason } from '../auth/refusal.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import type { ProxyHooks, UpstreamConcurrency } from '../proxy/proxy-call.js';
import type { BreakerObserver } from '../service/breaker-observer.js';
import type { CapCutoff, SnapshotReader } from '../store/snapshot-reader.js';
import { isSlow } from '../domain/window.js';
import { GaugeRenderer } from './gauge-renderer.js';
import type { ShedReason } from '../proxy/overload/concurrency-gate.js';

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
  private readonly shadowTransitions;
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
  private readonly authRefusals;
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
    this.shadowTransitions = circuit.shadowTransitions;
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
    this.authRefusals = new Counter({
      name: 'circuitlog_auth_refusals_total',
      help: 'Requests refused by the credential checks (401 missing or invalid token, 403 by scope, circuit or caller), by reason',
      labelNames: ['reason'],
      registers,
    });
  }

  /** A refused credential (auth/refusal.ts), by reason; an arrow: it is passed around unbound. */
  readonly authRefused = (reason: RefusalReason): void => {
    this.authRefusals.inc({ reason });
  };

  transition(circuit: Circuit, t: Transition): void {
    if (!this.isLabelled(circuit)) return;
    // Detect-only events are counted apart: a dashboard shows what a policy would have done before it is enforced;
    // so are a shadow policy's (issue 31), which change nothing either.
    const counter =
      t.shadow === true ? this.shadowTransitions : t.forcedState === 'closed' ? this.detectOnly : this.transitions;
    counter.inc({
      circuit: circuit.name,
      from: t.from,
      to: t.to,
      reason: t.reason,
    });
  }

  outcome(circuit: Circuit, success: boolean, durationMs: number | undefined, kind?: OutcomeKind): void {
    if (!this.isLabelled(circuit)) return;
    // The label is the outcome's kind (issue 29): six values at most, `success`/`failure` as before.
    const outcome = kind ?? (success ? 'success' : 'failure');
    // Keys: label values joined by NUL (a character a label value here never holds); the
    // labels object is made only for a series' first count.
    const key = `${circuit.name}\0${outcome}`;
    if (!this.outcomes.incKnown(key)) this.outcomes.inc(key, { circuit: circuit.name, kind: outcome, outcome });
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

// The instruments.

/** The counters and histogram of circuit outcomes, transitions and rejections. */
export function circuitInstruments(registers: Registry[]) {
  const transitions = new Counter({
    name: 'circuitlog_transitions_total',
    help: 'State transitions of circuits',
    labelNames: ['circuit', 'from', 'to', 'reason'],
    registers,
  });
  const detectOnly = new Counter({
    name: 'circuitlog_detect_only_transitions_total',
    help: 'Transitions, withheld trips and caller isolations the rules made while the circuit was forced closed (what the policy would have done); not in circuitlog_transitions_total',
    labelNames: ['circuit', 'from', 'to', 'reason'],
    registers,
  });
  const shadowTransitions = new Counter({
    name: 'circuitlog_shadow_transitions_total',
    help: "Transitions of circuits' shadow policies (issue 31: what a candidate policy would have done on the same traffic); not in circuitlog_transitions_total",
    labelNames: ['circuit', 'from', 'to', 'reason'],
    registers,
  });
  const outcomes = new BatchedCounter({
    name: 'circuitlog_outcomes_total',
    help: 'Outcomes recorded, whatever the route, by kind (success, failure, rejected, throttled, caller_deadline, cancelled); outcome: the same value, the label before kinds (deprecated)',
    labelNames: ['circuit', 'kind', 'outcome'],
    registers,
  });
  const slowCalls = new Counter({
    name: 'circuitlog_slow_calls_total',
    help: 'Outcomes at or over the circuit slow-call duration',
    labelNames: ['circuit'],
    registers,
  });
  const rejections = new Counter({
    name: 'circuitlog_calls_rejected_total',
    help: 'Calls refused by a circuit',
    labelNames: ['circuit'],
    registers,
  });
  const outcomeDuration = new BatchedHistogram({
    name: 'circuitlog_outcome_duration_seconds',
    help: 'duration_ms of recorded outcomes that carry one',
    registers,
  });
  return { transitions, detectOnly, shadowTransitions, outcomes, slowCalls, rejections, outcomeDuration };
}

/** The proxy's counters, histogram, overload metrics and panic gauge. */
export function proxyInstruments(registers: Registry[]) {
  const proxyRequests = new BatchedCounter({
    name: 'circuitlog_proxy_requests_total',
    help: 'Proxied requests by the status sent to the caller and the node that answered',
    labelNames: ['upstream', 'node', 'dc', 'status'],
    registers,
  });
  const proxyDuration = new BatchedHistogram({
    name: 'circuitlog_proxy_request_duration_seconds',
    help: 'Time from a proxied request to the head of its answer',
    registers,
  });
  const fallbacks = new Counter({
    name: 'circuitlog_proxy_fallbacks_total',
    help: 'Fallback answers served',
    labelNames: ['upstream', 'kind'],
    registers,
  });
  const degraded = new Counter({
    name: 'circuitlog_proxy_degraded_total',
    help: 'Answers sent with X-Degraded: true (a node of another DC, or a fallback)',
    labelNames: ['upstream'],
    registers,
  });
  const overload = new OverloadMetrics(registers);
  const coalesced = new Counter({
    name: 'circuitlog_proxy_coalesced_total',
    help: "Proxied requests answered from another request's call (coalescing)",
    labelNames: ['upstream'],
    registers,
  });
  const sendTimeouts = new Counter({
    name: 'circuitlog_proxy_send_timeouts_total',
    help: 'Callers cut off after send_timeout_ms without taking any of the answer bytes waiting for them',
    labelNames: ['upstream'],
    registers,
  });
  const healthChecks = new Counter({
    name: 'circuitlog_health_checks_total',
    help: 'Active health checks of proxy nodes',
    labelNames: ['upstream', 'node', 'result'],
    registers,
  });
  // 'max' across workers: 1 while any worker serves the upstream in panic (each reads the nodes itself).
  const panic = new Gauge({
    name: 'circuitlog_proxy_panic',
    help: 'Whether the upstream is in panic (panic_threshold_percent): 1 while node breakers are not honoured',
    labelNames: ['upstream'],
    aggregator: 'max',
    registers,
  });
  return { proxyRequests, proxyDuration, fallbacks, degraded, overload, coalesced, sendTimeouts, healthChecks, panic };
}

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

// Hot-path counting: the batched counter and histogram the instruments above count through.

/**
 * Hot-path counting for the per-request metrics. prom-client's `inc`/`observe` validate the
 * labels and hash them into a key on every call (about 3 µs per proxied request for four
 * series); here the caller gives a cheap string key, the labels object is kept from the first
 * call, and the amounts wait in plain slots until a scrape asks for them.
 */
type Labels = Record<string, string>;

interface CounterSlot {
  readonly labels: Labels;
  pending: number;
}

/** A prom-client Counter fed at scrape time (its `collect` hook) from per-key pending counts. */
export class BatchedCounter {
  private readonly slots = new Map<string, CounterSlot>();
  constructor(config: { name: string; help: string; labelNames: string[]; registers: Registry[] }) {
    const slots = this.slots;
    new Counter({
      ...config,
      collect(this: Counter) {
        for (const slot of slots.values()) {
          if (slot.pending === 0) continue;
          this.inc(slot.labels, slot.pending);
          slot.pending = 0;
        }
      },
    });
  }

  /** Count one for `key` when its series exists; false (nothing counted) before its first `inc`. */
  incKnown(key: string): boolean {
    const slot = this.slots.get(key);
    if (slot === undefined) return false;
    slot.pending += 1;
    return true;
  }

  /** Count one for `labels`; `key` must be unique per label set (labels are read only the first time). */
  inc(key: string, labels: Labels): void {
    const slot = this.slots.get(key);
    if (slot) slot.pending += 1;
    else this.slots.set(key, { labels, pending: 1 });
  }
}

interface HistogramSeries {
  readonly labels: Labels;
  readonly buckets: number[]; // not cumulative: buckets[i] counts values in (bound[i-1], bound[i]]
  sum: number;
  count: number;
}

/** prom-client's default buckets (Histogram in prom-client 15.1.3). */
export const DEFAULT_BUCKETS: readonly number[] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * A histogram registered in a prom-client Registry as a custom metric object. prom-client 15.1.3
 * has no public way to add bucket counts in bulk, so this produces the same `get()` and
 * `getForPromString()` shapes as its Histogram (lib/histogram.js): per series the cumulative
 * `_bucket` values with `le`, then `+Inf`, `_sum`, `_count`; aggregator `sum`, so the
 * AggregatorRegistry sums it across workers like a Histogram.
 */
export class BatchedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly bounds: readonly number[];
  private readonly series = new Map<string, HistogramSeries>();

  constructor(config: { name: string; help: string; registers: Registry[]; buckets?: readonly number[] }) {
    this.name = config.name;
    this.help = config.help;
    this.bounds = config.buckets ?? DEFAULT_BUCKETS;
    for (const r of config.registers) r.registerMetric(this as never);
  }

  /** `observe` for a series that exists; false (nothing observed) before its first `observe`. */
  observeKnown(key: string, value: number): boolean {
    const s = this.series.get(key);
    if (s === undefined) return false;
    if (Number.isFinite(value)) this.add(s, value);
    return true;
  }

  /** Observe `value` for `labels`; `key` must be unique per label set. Non-finite values are dropped. */
  observe(key: string, labels: Labels, value: number): void {
    if (!Number.isFinite(value)) return;
    let s = this.series.get(key);
    if (!s) {
      s = { labels, buckets: new Array<number>(this.bounds.length).fill(0), sum: 0, count: 0 };
      this.series.set(key, s);
    }
    this.add(s, value);
  }

  private add(s: HistogramSeries, value: number): void {
    s.sum += value;
    s.count += 1;
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (value <= b[i]!) {
        s.buckets[i]! += 1;
        break;
      }
    }
  }

  reset(): void {
    this.series.clear();
  }

  /** The shape Registry.getMetricsAsString reads (labels `le` plus the series as sharedLabels). */
  async getForPromString() {
    const values: {
      labels: Record<string, string | number>;
      sharedLabels: Labels;
      value: number;
      metricName: string;
      exemplar: null | undefined;
    }[] = [];
    const bucket = `${this.name}_bucket`;
    for (const s of this.series.values()) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += s.buckets[i]!;
        values.push({ labels: { le }, sharedLabels: s.labels, value: acc, metricName: bucket, exemplar: null });
      });
      values.push({
        labels: { le: '+Inf' },
        sharedLabels: s.labels,
        value: s.count,
        metricName: bucket,
        exemplar: null,
      });
      values.push({
        labels: {},
        sharedLabels: s.labels,
        value: s.sum,
        metricName: `${this.name}_sum`,
        exemplar: undefined,
      });
      values.push({
        labels: {},
        sharedLabels: s.labels,
        value: s.count,
        metricName: `${this.name}_count`,
        exemplar: undefined,
      });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** The shape getMetricsAsJSON (and so the cluster AggregatorRegistry) reads: labels splayed. */
  async get() {
    const data = await this.getForPromString();
    const values = data.values.map(({ labels, sharedLabels, ...rest }) => ({
      ...rest,
      labels: { ...labels, ...sharedLabels },
    }));
    return { ...data, values };
  }
}
