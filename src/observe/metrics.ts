import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Circuit, CircuitState, Transition } from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';
import { PROBLEMS } from '../domain/problem-codes.js';
import type { ProxyHooks } from '../proxy/proxy-hooks.js';
import type { BreakerObserver } from '../service/breaker-observer.js';
import type { CapCutoff, GaugeCircuit, SnapshotReader } from '../store/snapshot-reader.js';
import type { ForcedState } from '../domain/policy.js';
import { isSlow } from '../domain/window.js';
import { failureRateOf, throttleProbabilityOf } from './policy-fields.js';
import { BatchedCounter, BatchedHistogram } from './batched-metrics.js';
import { OverloadMetrics } from './overload-metrics.js';
import type { ShedReason } from '../proxy/overload/concurrency-gate.js';
import type { UpstreamConcurrency } from '../proxy/proxy-hooks.js';

export interface MetricsOptions {
  readonly snapshot: SnapshotReader;
  /** Circuits with per-circuit series: the first this many by creation (config `metrics.max_circuits`). */
  readonly maxCircuits: number;
  readonly clock: () => number;
}

const STATES: readonly CircuitState[] = ['closed', 'open', 'half_open'];
const FORCED = ['open', 'closed'] as const;
/**
 * A label value as the text format wants it: backslash, double quote and newline escaped
 * (https://prometheus.io/docs/instrumenting/exposition_formats/, "Text format details").
 */
function escapeLabel(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : value;
}

/** One labelled circuit's gauge lines, kept between scrapes while its state and force stay. */
interface RenderedCircuit {
  readonly state: CircuitState;
  readonly forced: ForcedState | null;
  readonly label: string;
  readonly stateLines: string;
  readonly forcedLines: string;
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
  private readonly overload;
  private readonly panic;
  /** The lines of each labelled circuit as last rendered, by name (at most about twice the cap). */
  private readonly rendered = new Map<string, RenderedCircuit>();
  private lastSections:
    | { readonly blocks: readonly RenderedCircuit[]; readonly state: string; readonly forced: string }
    | undefined;
  /** The end of the `max_circuits` cap, read at most every CUTOFF_REFRESH_MS (or when a newer circuit appears below it). */
  private cutoff: (CapCutoff & { readonly readAt: number }) | undefined;
  /**
   * In a cluster worker: the counters summed over every worker (asked of the primary).
   * Unset in a single process, where this process's counters are the whole truth.
   */
  clusterCounters: (() => Promise<string>) | undefined;

  constructor(private readonly options: MetricsOptions) {
    const registers = [this.counters];
    collectDefaultMetrics({ register: this.counters });
    this.transitions = new Counter({
      name: 'circuitlog_transitions_total',
      help: 'State transitions of circuits',
      labelNames: ['circuit', 'from', 'to', 'reason'],
      registers,
    });
    this.detectOnly = new Counter({
      name: 'circuitlog_detect_only_transitions_total',
      help: 'Transitions, withheld trips and caller isolations the rules made while the circuit was forced closed (what the policy would have done); not in circuitlog_transitions_total',
      labelNames: ['circuit', 'from', 'to', 'reason'],
      registers,
    });
    this.outcomes = new BatchedCounter({
      name: 'circuitlog_outcomes_total',
      help: 'Outcomes recorded, whatever the route',
      labelNames: ['circuit', 'outcome'],
      registers,
    });
    this.slowCalls = new Counter({
      name: 'circuitlog_slow_calls_total',
      help: 'Outcomes at or over the circuit slow-call duration',
      labelNames: ['circuit'],
      registers,
    });
    this.rejections = new Counter({
      name: 'circuitlog_calls_rejected_total',
      help: 'Calls refused by a circuit',
      labelNames: ['circuit'],
      registers,
    });
    this.outcomeDuration = new BatchedHistogram({
      name: 'circuitlog_outcome_duration_seconds',
      help: 'duration_ms of recorded outcomes that carry one',
      registers,
    });
    this.proxyRequests = new BatchedCounter({
      name: 'circuitlog_proxy_requests_total',
      help: 'Proxied requests by the status sent to the caller and the node that answered',
      labelNames: ['upstream', 'node', 'dc', 'status'],
      registers,
    });
    this.proxyDuration = new BatchedHistogram({
      name: 'circuitlog_proxy_request_duration_seconds',
      help: 'Time from a proxied request to the head of its answer',
      registers,
    });
    this.fallbacks = new Counter({
      name: 'circuitlog_proxy_fallbacks_total',
      help: 'Fallback answers served',
      labelNames: ['upstream', 'kind'],
      registers,
    });
    this.degraded = new Counter({
      name: 'circuitlog_proxy_degraded_total',
      help: 'Answers sent with X-Degraded: true (a node of another DC, or a fallback)',
      labelNames: ['upstream'],
      registers,
    });
    this.overload = new OverloadMetrics(registers);
    this.coalesced = new Counter({
      name: 'circuitlog_proxy_coalesced_total',
      help: "Proxied requests answered from another request's call (coalescing)",
      labelNames: ['upstream'],
      registers,
    });
    this.healthChecks = new Counter({
      name: 'circuitlog_health_checks_total',
      help: 'Active health checks of proxy nodes',
      labelNames: ['upstream', 'node', 'result'],
      registers,
    });
    // 'max' across workers: 1 while any worker serves the upstream in panic (each reads the nodes itself).
    this.panic = new Gauge({
      name: 'circuitlog_proxy_panic',
      help: 'Whether the upstream is in panic (panic_threshold_percent): 1 while node breakers are not honoured',
      labelNames: ['upstream'],
      aggregator: 'max',
      registers,
    });
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
    // Keys: label values joined by NUL (a character a label value here never holds).
    this.outcomes.inc(`${circuit.name}\0${outcome}`, { circuit: circuit.name, outcome });
    if (durationMs === undefined) return;
    this.outcomeDuration.observe(circuit.name, { circuit: circuit.name }, durationMs / 1000);
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
    this.proxyRequests.inc(`${upstream}\0${nodeId}\0${dc}\0${status}`, {
      upstream,
      node: nodeId,
      dc,
      status: String(status),
    });
    this.proxyDuration.observe(`${upstream}\0${nodeId}`, { upstream, node: nodeId }, durationMs / 1000);
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
    const gauges = this.renderGauges();
    const counters = this.clusterCounters ? await this.clusterCounters() : await this.counters.metrics();
    return `${gauges}${counters}`;
  }

  get contentType(): string {
    return this.counters.contentType;
  }

  /**
   * Per-circuit gauges for the first `maxCircuits` circuits, and the count per state of all,
   * written in the text format directly: with 10,000 circuits (50,000 series) prom-client's
   * Gauge objects took about ten times as long, all of it blocking the event loop.
   */
  private renderGauges(): string {
    const now = this.options.clock();
    const counts = this.options.snapshot.stateCounts(now);
    const circuits = this.options.snapshot.first(this.options.maxCircuits, now);
    const out = [
      '# HELP circuitlog_circuits Circuits in each state',
      '# TYPE circuitlog_circuits gauge',
      // Unknown yet (a Redis host reading its mirror after start): no sample rather than a short count.
      ...(counts === null ? [] : STATES.map((s) => `circuitlog_circuits{state="${s}"} ${counts[s]}`)),
      '# HELP circuitlog_circuit_state 1 for the current state of a circuit, 0 for the others',
      '# TYPE circuitlog_circuit_state gauge',
    ];
    const blocks = circuits.map((c) => this.renderedCircuit(c));
    const sections = this.sections(blocks);
    if (blocks.length > 0) out.push(sections.state);
    out.push(
      '# HELP circuitlog_circuit_forced 1 when the circuit is forced to this state',
      '# TYPE circuitlog_circuit_forced gauge',
    );
    if (blocks.length > 0) out.push(sections.forced);
    out.push(
      '# HELP circuitlog_circuit_isolated_callers Callers a quorum circuit isolates now (failures of their own); only circuits with a quorum',
      '# TYPE circuitlog_circuit_isolated_callers gauge',
    );
    circuits.forEach((c, i) => {
      if (c.isolatedCallers !== null)
        out.push(`circuitlog_circuit_isolated_callers{${blocks[i]!.label}} ${c.isolatedCallers}`);
    });
    out.push(
      '# HELP circuitlog_circuit_failure_rate Failure rate of the circuit window, percent',
      '# TYPE circuitlog_circuit_failure_rate gauge',
    );
    circuits.forEach((c, i) => {
      const rate = failureRateOf(c, now);
      if (rate !== null) out.push(`circuitlog_circuit_failure_rate{${blocks[i]!.label}} ${rate}`);
    });
    out.push(
      '# HELP circuitlog_circuit_throttle_probability Share of calls the soft throttle refuses now (0 to 1), circuits with a throttle',
      '# TYPE circuitlog_circuit_throttle_probability gauge',
    );
    circuits.forEach((c, i) => {
      const p = throttleProbabilityOf(c, now);
      if (p !== null) out.push(`circuitlog_circuit_throttle_probability{${blocks[i]!.label}} ${p}`);
    });
    out.push('');
    if (this.rendered.size > 2 * circuits.length + 1_000) this.forgetRendered(circuits); // deleted circuits' lines
    return out.join('\n');
  }

  /**
   * A circuit's state and forced lines as last rendered, made again only when its state or
   * force changed: most circuits change neither between two scrapes, and making 50,000 lines
   * anew was half a scrape's time.
   */
  private renderedCircuit(c: GaugeCircuit): RenderedCircuit {
    const known = this.rendered.get(c.name);
    if (known !== undefined && known.state === c.state && known.forced === c.forcedState) return known;
    const label = known?.label ?? `circuit="${escapeLabel(c.name)}"`;
    const block: RenderedCircuit = {
      state: c.state,
      forced: c.forcedState,
      label,
      stateLines: STATES.map((s) => `circuitlog_circuit_state{${label},state="${s}"} ${c.state === s ? 1 : 0}`).join(
        '\n',
      ),
      forcedLines: FORCED.map(
        (s) => `circuitlog_circuit_forced{${label},forced_state="${s}"} ${c.forcedState === s ? 1 : 0}`,
      ).join('\n'),
    };
    this.rendered.set(c.name, block);
    return block;
  }

  /** The state and forced lines of every labelled circuit: the last scrape's text while no circuit's block changed. */
  private sections(blocks: readonly RenderedCircuit[]): { readonly state: string; readonly forced: string } {
    const last = this.lastSections;
    if (last !== undefined && last.blocks.length === blocks.length && blocks.every((b, i) => b === last.blocks[i]))
      return last;
    this.lastSections = {
      blocks,
      state: blocks.map((b) => b.stateLines).join('\n'),
      forced: blocks.map((b) => b.forcedLines).join('\n'),
    };
    return this.lastSections;
  }

  private forgetRendered(circuits: readonly GaugeCircuit[]): void {
    const kept = new Map(circuits.map((c) => [c.name, this.rendered.get(c.name)!]));
    this.rendered.clear();
    for (const [name, block] of kept) this.rendered.set(name, block);
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
