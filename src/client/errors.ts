/** Errors the client throws; each has a stable string `code`, like the server's problems. */

import type { CircuitState } from '../domain/circuit.js';

/** The circuit refused the call: it is open, half-open with every probe slot taken, or forced open. */
export class CircuitOpenError extends Error {
  readonly code:
    | 'CIRCUIT_OPEN'
    | 'CIRCUIT_FORCED_OPEN'
    | 'CIRCUIT_THROTTLED'
    | 'DEPENDENCY_THROTTLED'
    | 'CIRCUIT_RAMPING';
  readonly circuit: string;
  readonly state: CircuitState;
  /** When a call may be admitted again (for a forced-open circuit: when to ask again). */
  readonly retryAt: Date;
  /** True when the client's own breaker refused, while circuitlog was unreachable. */
  readonly local: boolean;

  /** `caller`: only this client's caller is refused (isolated by failures of its own); the circuit serves other callers. */
  readonly scope: 'circuit' | 'caller';
  /** With scope `caller`: the caller id refused (this client's `caller`), else undefined. */
  readonly caller: string | undefined;

  constructor(
    circuit: string,
    state: CircuitState,
    retryAt: number,
    options: { forced?: boolean; local?: boolean; caller?: string } = {},
  ) {
    const forced = options.forced === true;
    super(
      forced
        ? `Circuit '${circuit}' is forced open.`
        : options.caller !== undefined
          ? `Caller '${options.caller}' is isolated from circuit '${circuit}' after failures of its own; retry at ${new Date(retryAt).toISOString()}.`
          : `Circuit '${circuit}' is ${state === 'open' ? 'open' : 'half-open with every probe slot taken'}; retry at ${new Date(retryAt).toISOString()}.`,
    );
    this.scope = options.caller === undefined ? 'circuit' : 'caller';
    this.caller = options.caller;
    this.name = 'CircuitOpenError';
    this.code = forced ? 'CIRCUIT_FORCED_OPEN' : 'CIRCUIT_OPEN';
    this.circuit = circuit;
    this.state = state;
    this.retryAt = new Date(retryAt);
    this.local = options.local === true;
  }
}

/**
 * The circuit is closed, but its soft throttle refused this call (`throttle` policy): a
 * share of calls is refused while the dependency accepts too few. A `CircuitOpenError`, so
 * code that handles refusals handles this one too; the next call may well be admitted.
 */
export class CircuitThrottledError extends CircuitOpenError {
  declare readonly code: 'CIRCUIT_THROTTLED';
  /** The refusal probability the call was drawn against. */
  readonly probability: number;

  constructor(circuit: string, probability: number, retryAt: number, options: { local?: boolean } = {}) {
    super(circuit, 'closed', retryAt, options);
    this.name = 'CircuitThrottledError';
    (this as { code: string }).code = 'CIRCUIT_THROTTLED';
    this.message = `Circuit '${circuit}' is throttled: ${Math.round(probability * 1000) / 10}% of calls are refused while its dependency accepts too few.`;
    this.probability = probability;
  }
}

/**
 * The dependency asked for less load (a `429`, or a `503` with `Retry-After`) and the circuit
 * is cooling down (issue 29): circuitlog's `dependency-throttled` answer, or this client's view
 * of it. Scope `circuit`: every caller waits; `caller`: this client's caller alone. The circuit
 * stays closed; calls are admitted again at `coolUntil`.
 */
export class DependencyThrottledError extends CircuitOpenError {
  declare readonly code: 'DEPENDENCY_THROTTLED';
  /** Whole seconds until the cool-down ends, rounded up (the answer's `Retry-After`). */
  readonly retryAfter: number;
  readonly coolUntil: Date;

  constructor(
    circuit: string,
    coolUntil: number,
    now: number,
    options: { scope?: 'circuit' | 'caller'; caller?: string; local?: boolean; state?: CircuitState } = {},
  ) {
    const caller = options.scope === 'caller' ? options.caller : undefined;
    super(circuit, options.state ?? 'closed', coolUntil, { local: options.local, caller });
    this.name = 'DependencyThrottledError';
    (this as { code: string }).code = 'DEPENDENCY_THROTTLED';
    this.coolUntil = new Date(coolUntil);
    this.retryAfter = Math.max(0, Math.ceil((coolUntil - now) / 1000));
    this.message = `The dependency of circuit '${circuit}' asked for less load${caller === undefined ? '' : ` from caller '${caller}'`}; calls resume at ${this.coolUntil.toISOString()}.`;
  }
}

/**
 * The circuit is ramping up after it closed or a cool-down ended (policy `ramp`, issue 29): this
 * call was above the share admitted now. Like a throttled call, the next one may be admitted.
 */
export class CircuitRampingError extends CircuitOpenError {
  declare readonly code: 'CIRCUIT_RAMPING';
  /** The percent of calls admitted when this one was refused. */
  readonly rampPercent: number;
  /** Seconds before asking again (the answer's `Retry-After: 1`). */
  readonly retryAfter = 1;
  /** When the ramp reaches 100 %, if known. */
  readonly rampUntil: Date | null;

  constructor(
    circuit: string,
    rampPercent: number,
    rampUntil: number | null,
    now: number,
    options: { local?: boolean } = {},
  ) {
    super(circuit, 'closed', now + 1_000, options);
    this.name = 'CircuitRampingError';
    (this as { code: string }).code = 'CIRCUIT_RAMPING';
    this.rampPercent = rampPercent;
    this.rampUntil = rampUntil === null ? null : new Date(rampUntil);
    this.message = `Circuit '${circuit}' is ramping up: ${Math.round(rampPercent * 10) / 10}% of calls are admitted now.`;
  }
}

/** circuitlog could not be reached and the client was created with `failOpen: false`. */
export class CircuitlogUnavailableError extends Error {
  readonly code = 'CIRCUITLOG_UNAVAILABLE';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'CircuitlogUnavailableError';
  }
}

/** The protected call ran past `timeoutMs`; its signal was aborted with this error. */
export class CallTimeoutError extends Error {
  readonly code = 'CALL_TIMEOUT';
  readonly circuit: string;
  readonly timeoutMs: number;

  constructor(circuit: string, timeoutMs: number) {
    super(`Call on circuit '${circuit}' took longer than ${timeoutMs} ms.`);
    this.name = 'CallTimeoutError';
    this.circuit = circuit;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * circuitlog answered with a 4xx (a wrong token, a name it rejects): a configuration error
 * that retrying cannot fix, so it is thrown rather than treated as an outage.
 */
export class CircuitlogRequestError extends Error {
  readonly code = 'CIRCUITLOG_REJECTED';
  readonly status: number;
  /** The problem document circuitlog sent, when it sent one. */
  readonly problem: unknown;

  constructor(status: number, problem: unknown) {
    const detail = typeof problem === 'object' && problem !== null && 'detail' in problem ? String(problem.detail) : '';
    super(`circuitlog answered ${status}${detail ? `: ${detail}` : ''}`);
    this.name = 'CircuitlogRequestError';
    this.status = status;
    this.problem = problem;
  }
}

/**
 * The client was closed (`close()` was called): it takes no new calls. Like the Python
 * client's `ClientClosedError`; a programming error, so no fallback sees it.
 */
export class ClientClosedError extends Error {
  readonly code = 'CLIENT_CLOSED';

  constructor() {
    super('circuitlog client is closed');
    this.name = 'ClientClosedError';
  }
}
