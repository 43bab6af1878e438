import type { Circuit, RampingVerdict, ThrottledVerdict, Verdict } from '../domain/circuit.js';
import { RAMP_RETRY_AFTER_MS } from '../domain/outcome-rules.js';
import { AppError } from '../domain/errors.js';
import { THROTTLE_RETRY_AFTER_MS } from '../domain/throttle.js';

export interface OpenErrorOptions {
  readonly forced?: boolean;
  /** The soft throttle refused the call (the verdict's `throttled`). */
  readonly throttled?: ThrottledVerdict;
  /** Replaces the `circuit` member (circuitlog's `/call` sends the whole object). */
  readonly circuit?: unknown;
}

/**
 * The error for a refused verdict: `openError`, or CIRCUIT_OPEN scoped to the caller when its
 * own isolation refused it (`callerOpenError`). `options.circuit` as in `openError`.
 */
export function refusalError(
  circuit: Circuit,
  verdict: Verdict & { allowed: false },
  caller: string | undefined,
  options: { circuit?: unknown } = {},
): AppError {
  if (verdict.cooled !== undefined)
    return coolDownError(circuit, verdict.retryAt, verdict.cooled.scope, caller, options);
  if (verdict.ramping !== undefined) return rampingError(circuit, verdict.ramping, options);
  if (verdict.scope === 'caller' && caller !== undefined)
    return callerOpenError(circuit, caller, verdict.retryAt, options.circuit);
  return openError(circuit, verdict.retryAt, {
    forced: verdict.forced,
    throttled: verdict.throttled,
    circuit: options.circuit,
  });
}

/**
 * The error for a refused call: CIRCUIT_FORCED_OPEN when forced, CIRCUIT_THROTTLED when
 * the soft throttle refused it, else CIRCUIT_OPEN.
 */
export function openError(circuit: Circuit, retryAt: number, options: OpenErrorOptions = {}): AppError {
  const extensions = {
    circuit: options.circuit ?? circuit.name,
    state: circuit.state,
    open_until: circuit.openUntil === null ? null : isoTime(circuit.openUntil),
  };
  if (options.throttled) return throttledError(circuit, options.throttled, extensions);
  if (options.forced) {
    const detail = `Circuit '${circuit.name}' is forced open by an operator; every call is refused until the force is cleared.`;
    return new AppError('CIRCUIT_FORCED_OPEN', detail, {
      retryAt,
      extensions: { ...extensions, forced_state: 'open' },
    });
  }
  const detail =
    circuit.state === 'open'
      ? `Circuit '${circuit.name}' is open; calls are refused until ${isoTime(retryAt)}.`
      : `Circuit '${circuit.name}' is half-open and all ${circuit.halfOpenMaxCalls} probe slot(s) are taken.`;
  return new AppError('CIRCUIT_OPEN', detail, { retryAt, extensions });
}

/** A call the soft throttle refused: 503 `circuit-throttled`, `Retry-After: 1`, the probability it was drawn against. */
function throttledError(circuit: Circuit, throttled: ThrottledVerdict, extensions: Record<string, unknown>): AppError {
  const percent = Math.round(throttled.probability * 1000) / 10;
  const detail = `Circuit '${circuit.name}' is closed but throttled: it refuses ${percent}% of calls while its dependency accepts too few of them.`;
  return new AppError('CIRCUIT_THROTTLED', detail, {
    retryAfterSeconds: THROTTLE_RETRY_AFTER_MS / 1000,
    extensions: { ...extensions, throttle_probability: throttled.probability },
  });
}

/**
 * A cool-down refused the call (issue 29): 503 `dependency-throttled`, `Retry-After` the whole
 * seconds left, `cool_until` and the scope, besides what an open answer carries.
 */
function coolDownError(
  circuit: Circuit,
  until: number,
  scope: 'circuit' | 'caller',
  caller: string | undefined,
  options: { circuit?: unknown },
): AppError {
  const at = isoTime(until);
  const who = scope === 'caller' ? `caller '${caller}'` : 'every caller';
  const detail = `The dependency behind circuit '${circuit.name}' asked for less load (Retry-After); ${who} cools down until ${at}.`;
  return new AppError('DEPENDENCY_THROTTLED', detail, {
    retryAt: until,
    extensions: {
      circuit: options.circuit ?? circuit.name,
      state: circuit.state,
      open_until: circuit.openUntil === null ? null : isoTime(circuit.openUntil),
      cool_until: at,
      scope,
      ...(scope === 'caller' && caller !== undefined ? { caller } : {}),
    },
  });
}

/** The slow start refused the call (issue 29): 503 `circuit-ramping`, `Retry-After: 1`, the share and the ramp's end. */
function rampingError(circuit: Circuit, ramping: RampingVerdict, options: { circuit?: unknown }): AppError {
  const percent = Math.round(ramping.percent * 100) / 100;
  const until = isoTime(ramping.until);
  const detail = `Circuit '${circuit.name}' is ramping up after recovering: it admits ${percent}% of calls now, all of them at ${until}.`;
  return new AppError('CIRCUIT_RAMPING', detail, {
    retryAfterSeconds: RAMP_RETRY_AFTER_MS / 1000,
    extensions: {
      circuit: options.circuit ?? circuit.name,
      state: circuit.state,
      open_until: null,
      ramp_percent: percent,
      ramp_until: until,
    },
  });
}

/**
 * CIRCUIT_OPEN scoped to one caller (issue 17): the caller's own failures isolated it; the
 * circuit itself is still serving every other caller. `open_until` is the caller's own.
 * `circuit` replaces the `circuit` member (circuitlog's `/call` sends the whole object).
 */
export function callerOpenError(circuit: Circuit, caller: string, retryAt: number, circuitMember?: unknown): AppError {
  const until = isoTime(retryAt);
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

/**
 * An epoch-ms time as ISO 8601, the last one remembered: a refusing circuit is asked again and
 * again with the same `open_until`, and building a Date and its text costs about a third of a
 * microsecond each time (a refusal names it twice). One entry, so bounded.
 */
function isoTime(ms: number): string {
  if (ms !== lastIsoMs) {
    lastIso = new Date(ms).toISOString();
    lastIsoMs = ms;
  }
  return lastIso;
}
let lastIsoMs = Number.NaN;
let lastIso = '';
