/**
 * The in-process breakers used while circuitlog is unreachable: the server's own pure state
 * machine from `domain/` (imported, never copied), seeded with each circuit's last known
 * policy and state, and thrown away once the client is connected again (the server's
 * state wins).
 */

import { admit, newCircuit, recordFailure, recordSuccess, type Circuit, type CircuitSettings, type CircuitState, type Verdict } from '../domain/circuit.js';
import type { CircuitJson } from './transport.js';

/** What the client last knew of a circuit from circuitlog. */
export interface KnownCircuit {
  readonly state: CircuitState | undefined;
  /** The circuit's JSON from its last snapshot (policy fields), or null. */
  readonly json: CircuitJson | null;
}

export class LocalBreakers {
  private readonly circuits = new Map<string, Circuit>();

  constructor(
    private readonly clock: () => number,
    /** Policy for a circuit the client never saw a snapshot of. */
    private readonly defaults: CircuitSettings,
    /** How long a locally admitted half-open probe holds its slot. */
    private readonly probeLeaseMs: number,
  ) {}

  admit(name: string, known: KnownCircuit | undefined): Verdict {
    const now = this.clock();
    const step = admit(this.get(name, known, now), now, { probeLeaseMs: this.probeLeaseMs });
    this.circuits.set(name, step.circuit);
    return step.verdict;
  }

  record(name: string, success: boolean, known: KnownCircuit | undefined): void {
    const now = this.clock();
    const c = this.get(name, known, now);
    this.circuits.set(name, (success ? recordSuccess(c, now) : recordFailure(c, now)).circuit);
  }

  state(name: string): CircuitState | undefined {
    return this.circuits.get(name)?.state;
  }

  clear(): void {
    this.circuits.clear();
  }

  private get(name: string, known: KnownCircuit | undefined, now: number): Circuit {
    const existing = this.circuits.get(name);
    if (existing !== undefined) return existing;
    const circuit = newCircuit(name, settingsFrom(known?.json ?? null, this.defaults), now);
    if (known?.state === 'half_open') return { ...circuit, state: 'half_open', halfOpenAt: now };
    if (known?.state !== 'open') return circuit;
    // A circuit last known open stays open locally until its known open_until (else its timeout).
    const openUntil = typeof known.json?.open_until === 'string' ? Date.parse(known.json.open_until) : NaN;
    return {
      ...circuit,
      state: 'open',
      // A known open_until already past makes it half-open at once, as on the server.
      openUntil: Number.isFinite(openUntil) ? openUntil : now + circuit.timeoutSeconds * 1000,
    };
  }
}

function positiveInt(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0 ? value : fallback;
}

/** The domain's settings from a circuit's JSON, field by field, defaults where missing. */
export function settingsFrom(json: CircuitJson | null, defaults: CircuitSettings): CircuitSettings {
  return {
    failureThreshold: positiveInt(json?.failure_threshold, defaults.failureThreshold),
    timeoutSeconds: positiveInt(json?.timeout_seconds, defaults.timeoutSeconds),
    halfOpenMaxCalls: positiveInt(json?.half_open_max_calls, defaults.halfOpenMaxCalls),
  };
}
