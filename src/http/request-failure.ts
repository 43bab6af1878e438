import type { Logger } from 'pino';
import { AppError, type ErrorCode } from '../domain/errors.js';
import { PROBLEMS } from '../domain/problem-codes.js';

/** Anything thrown while answering, as an AppError: a stranger is a bug, answered as a 500 `INTERNAL`. */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  return new AppError('INTERNAL', 'An internal error occurred.', { cause: error });
}

/**
 * The `request_failed` log line of an error answer, at the level its code deserves: a 500 is
 * an error with its cause; a refusal by a circuit (open, forced open, throttled, cooling down
 * for its dependency, ramping) is the breaker working (debug: its transitions are logged, not
 * each refused call, which under an outage would be one line per call); a storage problem a
 * warning; the rest info.
 * Its `request_id` is the one in the answer's `X-Request-Id` and problem document.
 */
/** The codes of a call a circuit refused. */
const REFUSALS = new Set<ErrorCode>([
  'CIRCUIT_OPEN',
  'CIRCUIT_FORCED_OPEN',
  'CIRCUIT_THROTTLED',
  'DEPENDENCY_THROTTLED',
  'CIRCUIT_RAMPING',
]);

export function logFailure(logger: Logger, method: string, path: string, error: AppError, requestId: string): void {
  const status = PROBLEMS[error.code].status;
  const fields = { event: 'request_failed', method, path, status, code: error.code, request_id: requestId };
  if (error.code === 'INTERNAL') logger.error({ ...fields, err: error.options.cause ?? error }, error.message);
  else if (REFUSALS.has(error.code)) logger.debug(fields, error.message);
  else if (error.code.startsWith('STORAGE_')) logger.warn(fields, error.message);
  else logger.info(fields, error.message);
}
