import type { Circuit } from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';

/**
 * The error for a refused call: CIRCUIT_FORCED_OPEN when forced, else CIRCUIT_OPEN.
 * `circuit` replaces the `circuit` member (circuitlog's `/call` sends the whole object).
 */
export function openError(circuit: Circuit, retryAt: number, options: { forced?: boolean; circuit?: unknown } = {}): AppError {
  const extensions = {
    circuit: options.circuit ?? circuit.name,
    state: circuit.state,
    open_until: circuit.openUntil === null ? null : new Date(circuit.openUntil).toISOString(),
  };
  if (options.forced) {
    const detail = `Circuit '${circuit.name}' is forced open by an operator; every call is refused until the force is cleared.`;
    return new AppError('CIRCUIT_FORCED_OPEN', detail, { retryAt, extensions: { ...extensions, forced_state: 'open' } });
  }
  const detail =
    circuit.state === 'open'
      ? `Circuit '${circuit.name}' is open; calls are refused until ${new Date(retryAt).toISOString()}.`
      : `Circuit '${circuit.name}' is half-open and all ${circuit.halfOpenMaxCalls} probe slot(s) are taken.`;
  return new AppError('CIRCUIT_OPEN', detail, { retryAt, extensions });
}
