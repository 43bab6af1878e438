import { windowFigures } from '../domain/window.js';
import type { GaugeCircuit } from '../store/snapshot-reader.js';

/** The circuit's window failure rate in percent as of `now` (expired time buckets left out), or null without a window. */
export function failureRateOf(circuit: GaugeCircuit, now: number): number | null {
  return circuit.window === null ? null : windowFigures(circuit.window, circuit.windowState, now).failureRate;
}
