/**
 * Soft throttling in the client, on circuits the local view shows closed: the rule of
 * `domain/throttle.ts` (the SRE book's client-side throttling) over this client's own
 * calls, so a throttled call costs no round trip. Requests are the calls this client
 * ran on the circuit (counted when their outcome is recorded) plus the ones this
 * throttle refused; accepts are the successes. The policy (`throttle` of the circuit's
 * JSON) comes from circuitlog's last snapshot.
 */

import { throttleFromJson as throttleOfJson } from '../domain/policy-wire.js';
import {
  countRequest,
  decideThrottle,
  type RandomSource,
  type ThrottleDecision,
  type ThrottlePolicy,
  type ThrottleState,
} from '../domain/throttle.js';
import type { CircuitJson } from './transport.js';

const ADMIT: ThrottleDecision = Object.freeze({ throttled: false, probability: 0 });

/**
 * Counts per circuit, at most `maxCircuits` of them (the least recently used goes first).
 * Each holds at most `window_seconds` per-second buckets (600 at most), so the memory is
 * bounded by `maxCircuits` x 600 buckets of four numbers.
 */
export class LocalThrottles {
  private readonly counts = new Map<string, { window: number; state: ThrottleState | null }>();

  constructor(
    private readonly clock: () => number,
    private readonly random: RandomSource,
    private readonly maxCircuits = 10_000,
  ) {}

  /** Refuse this call? A refusal is counted as a request not accepted. */
  decide(name: string, json: CircuitJson | null): ThrottleDecision {
    const throttle = throttleFromJson(json);
    if (throttle === null) return ADMIT;
    const now = this.clock();
    const entry = this.entry(name, throttle);
    const decision = decideThrottle(throttle, entry.state, now, this.random);
    if (decision.throttled) entry.state = countRequest(throttle, entry.state, false, now);
    return decision;
  }

  /** Count an outcome this client recorded while the circuit was closed. */
  record(name: string, json: CircuitJson | null, success: boolean): void {
    const throttle = throttleFromJson(json);
    if (throttle === null) return;
    const entry = this.entry(name, throttle);
    entry.state = countRequest(throttle, entry.state, success, this.clock());
  }

  /** The circuit left the closed state (a stream event): its counts start empty, as the server's. */
  forget(name: string): void {
    this.counts.delete(name);
  }

  clear(): void {
    this.counts.clear();
  }

  private entry(name: string, throttle: ThrottlePolicy): { window: number; state: ThrottleState | null } {
    let entry = this.counts.get(name);
    if (entry !== undefined) this.counts.delete(name); // re-inserted: now the most recently used
    // Counts kept under another window would be read over the wrong span: start empty.
    if (entry === undefined || entry.window !== throttle.windowSeconds)
      entry = { window: throttle.windowSeconds, state: null };
    this.counts.set(name, entry);
    if (this.counts.size > this.maxCircuits) this.counts.delete(this.counts.keys().next().value!);
    return entry;
  }
}

const NO_JSON = {};

/** The `throttle` of a circuit's JSON (the domain's lenient reading), read once per JSON object. */
const throttles = new WeakMap<object, ThrottlePolicy | null>();
export function throttleFromJson(json: CircuitJson | null): ThrottlePolicy | null {
  const key = json ?? NO_JSON;
  let throttle = throttles.get(key);
  if (throttle === undefined) throttles.set(key, (throttle = throttleOfJson(json?.throttle)));
  return throttle;
}
