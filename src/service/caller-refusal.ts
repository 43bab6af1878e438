import type { Circuit } from '../domain/circuit.js';
import { AppError } from '../domain/errors.js';

/**
 * CIRCUIT_OPEN scoped to one caller (issue 17): the caller's own failures isolated it; the
 * circuit itself is still serving every other caller. `open_until` is the caller's own.
 * `circuit` replaces the `circuit` member (circuitlog's `/call` sends the whole object).
 */
export function callerOpenError(circuit: Circuit, caller: string, retryAt: number, circuitMember?: unknown): AppError {
  const until = new Date(retryAt).toISOString();
  const detail = `Caller '${caller}' is isolated from circuit '${circuit.name}' after failures of its own; its calls are refused until ${until} (then one probe). Other callers are allowed.`;
  return new AppError('CIRCUIT_OPEN', detail, {
    retryAt,
    extensions: {
      circuit: circuitMember ?? circuit.name,
      state: circuit.state,
      open_until: until,
      scope: 'caller',
      caller,
    },
  });
}
