/**
 * The in-process breakers used while circuitlog is unreachable: the server's own pure state
 * machine from `domain/` (imported, never copied), seeded with each circuit's last known
 * policy and state, and thrown away once the client is connected again (the server's
 * state wins).
 */

import {
  admit,
  configure,
  newCircuit,
  recordOutcome,
  reset,
  type Circuit,
  type CircuitSettings,
  type CircuitState,
  type Verdict,
} from '../domain/circuit.js';
import { policyOf, resolvePolicy, type CircuitPolicy } from '../domain/policy.js';
import { policyFromJson } from '../domain/policy-wire.js';
import type { CircuitJson } from './transport.js';

/** What the client last knew of a circuit from circuitlog. */
export interface KnownCircuit {
  readonly state: CircuitState | undefined;
  /** The circuit's JSON from its last snapshot (policy fields), or null. */
  readonly json: CircuitJson | null;
}

export class LocalBreakers {
  private readonly circuits = new Map<string, Circuit>();
  private readonly defaults: CircuitPolicy;

  constructor(
    private readonly clock: () => number,
    /** Policy for a circuit the client never saw a snapshot of. */
    defaults: CircuitSettings,
    /** How long a locally admitted half-open probe holds its slot. */
    private readonly probeLeaseMs: number,
    /** Bound, as the view's: the least recently used circuit goes first. */
    private readonly maxCircuits = 10_000,
    /** Soft throttling's draws (default `Math.random`). */
    private readonly random: () => number = Math.random,
  ) {
    this.defaults = resolvePolicy(defaults);
  }

  admit(name: string, known: KnownCircuit | undefined): Verdict {
    const now = this.clock();
    const step = admit(this.get(name, known, now), now, { probeLeaseMs: this.probeLeaseMs }, undefined, this.random);
    this.put(name, step.circuit);
    return step.verdict;
  }

  /**
   * Count an outcome. One that arrives while the local circuit is open (a call admitted
   * before it opened) changes no state: the rule circuitlog applies to batched outcomes.
   */
  record(name: string, success: boolean, durationMs: number | undefined, known: KnownCircuit | undefined): void {
    const now = this.clock();
    const c = this.get(name, known, now);
    this.put(name, recordOutcome(c, { success, durationMs, late: 'count_only' }, now).circuit);
  }

  /** Store as the most recently used, dropping the least recently used past `maxCircuits`. */
  private put(name: string, circuit: Circuit): void {
    this.circuits.delete(name);
    this.circuits.set(name, circuit);
    if (this.circuits.size > this.maxCircuits) this.circuits.delete(this.circuits.keys().next().value!);
  }

  /** An operator reset seen at circuitlog: closed, counts 0, as the server's own reset. */
  reset(name: string, known: KnownCircuit | undefined): void {
    const now = this.clock();
    this.circuits.set(name, reset(this.get(name, known, now), now).circuit);
  }

  /** A circuit's newer JSON (a fresh snapshot): its policy applies from the next call, counts kept. */
  configure(name: string, json: CircuitJson): void {
    const now = this.clock();
    const c = this.get(name, { state: undefined, json }, now);
    this.circuits.set(name, configure(c, policyFromJson(json, policyOf(c)), now).circuit);
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
    const circuit = newCircuit(name, policyFromJson(known?.json ?? null, this.defaults), now);
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
