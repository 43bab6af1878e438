import { rampPercent } from '../domain/outcome-kind.js';
import { currentThrottleProbability } from '../domain/throttle.js';
import { windowFigures } from '../domain/window.js';
import type { GaugeCircuit } from '../store/snapshot-reader.js';

/** The circuit's window failure rate in percent as of `now` (expired time buckets left out), or null without a window. */
export function failureRateOf(circuit: GaugeCircuit, now: number): number | null {
  return circuit.window === null ? null : windowFigures(circuit.window, circuit.windowState, now).failureRate;
}

/**
 * The circuit's soft-throttle refusal probability as of `now` (0 to 1), or null without a
 * throttle. 0 unless closed and unforced: only then does the throttle decide.
 */
export function throttleProbabilityOf(circuit: GaugeCircuit, now: number): number | null {
  if (circuit.throttle === null) return null;
  if (circuit.state !== 'closed' || circuit.forcedState !== null) return 0;
  return currentThrottleProbability(circuit.throttle, circuit.throttleState, now);
}

/**
 * The share of calls a circuit with a ramp policy admits now, in percent (issue 29): below 100
 * only while closed and ramping; null without a ramp policy.
 */
export function rampPercentOf(circuit: GaugeCircuit, now: number): number | null {
  const ramp = circuit.ramp ?? null;
  if (ramp === null) return null;
  if (circuit.state !== 'closed' || circuit.forcedState !== null) return 100;
  return rampPercent(circuit.rampUntil ?? null, ramp.seconds, ramp.startPercent, now);
}
