import type { CircuitState } from '../domain/circuit.js';
import type { ForcedState } from '../domain/policy.js';
import type { GaugeCircuit, SnapshotReader } from '../store/snapshot-reader.js';
import { failureRateOf, rampPercentOf, throttleProbabilityOf } from './policy-fields.js';

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

/**
 * The state gauges in the text format, read from the database at each scrape, with each
 * labelled circuit's lines kept between scrapes while its state and force stay.
 */
export class GaugeRenderer {
  /** The lines of each labelled circuit as last rendered, by name (at most about twice the cap). */
  private readonly rendered = new Map<string, RenderedCircuit>();
  private lastSections:
    | { readonly blocks: readonly RenderedCircuit[]; readonly state: string; readonly forced: string }
    | undefined;

  constructor(
    private readonly snapshot: SnapshotReader,
    private readonly maxCircuits: number,
    private readonly clock: () => number,
  ) {}

  /**
   * Per-circuit gauges for the first `maxCircuits` circuits, and the count per state of all,
   * written in the text format directly: with 10,000 circuits (50,000 series) prom-client's
   * Gauge objects took about ten times as long, all of it blocking the event loop.
   */
  render(): string {
    const now = this.clock();
    const counts = this.snapshot.stateCounts(now);
    const circuits = this.snapshot.first(this.maxCircuits, now);
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
    out.push(
      '# HELP circuitlog_circuit_ramp_percent Share of calls a ramping circuit admits now (slow start), percent; 100 when not ramping; circuits with a ramp policy',
      '# TYPE circuitlog_circuit_ramp_percent gauge',
    );
    circuits.forEach((c, i) => {
      const p = rampPercentOf(c, now);
      if (p !== null) out.push(`circuitlog_circuit_ramp_percent{${blocks[i]!.label}} ${Math.round(p * 100) / 100}`);
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
}
