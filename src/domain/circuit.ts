/**
 * The breaker state machine: pure functions `(circuit, ..., now) -> step`.
 * Nothing here does I/O or reads a clock; every store wraps these in one atomic
 * read-modify-write. A function that changes nothing returns the circuit it was given
 * (same reference), which lets a store skip the write entirely.
 */

export type CircuitState = 'closed' | 'open' | 'half_open';

/** Epoch milliseconds. */
export type EpochMs = number;

export interface Circuit {
  readonly id: number; // 0 until the store has inserted it
  readonly name: string;
  readonly state: CircuitState;
  readonly failureCount: number;
  readonly failureThreshold: number;
  readonly timeoutSeconds: number;
  readonly halfOpenMaxCalls: number;
  /** Expiry times of the probe leases handed out while half-open, oldest first. */
  readonly probeLeases: readonly EpochMs[];
  readonly openUntil: EpochMs | null;
  readonly halfOpenAt: EpochMs | null;
  readonly lastFailureAt: EpochMs | null;
  readonly createdAt: EpochMs;
  readonly updatedAt: EpochMs;
}

export type TransitionReason =
  | 'failure_threshold_reached'
  | 'probe_failed'
  | 'open_timeout_elapsed'
  | 'probe_succeeded'
  | 'success_recorded'
  | 'manual_reset';

export interface Transition {
  readonly from: CircuitState;
  readonly to: CircuitState;
  readonly reason: TransitionReason;
  readonly at: EpochMs;
}

/** What a step did: the circuit after it and the state changes it made, in order. */
export interface Step {
  readonly circuit: Circuit;
  readonly transitions: readonly Transition[];
}

/** Settings a circuit is created with. */
export interface CircuitSettings {
  readonly failureThreshold: number;
  readonly timeoutSeconds: number;
  readonly halfOpenMaxCalls: number;
}

/** Settings that apply to every circuit at every step. */
export interface BreakerPolicy {
  /** How long an admitted half-open probe holds its slot without reporting. */
  readonly probeLeaseMs: number;
}

export function newCircuit(name: string, settings: CircuitSettings, now: EpochMs): Circuit {
  return {
    id: 0,
    name,
    state: 'closed',
    failureCount: 0,
    failureThreshold: settings.failureThreshold,
    timeoutSeconds: settings.timeoutSeconds,
    halfOpenMaxCalls: settings.halfOpenMaxCalls,
    probeLeases: [],
    openUntil: null,
    halfOpenAt: null,
    lastFailureAt: null,
    createdAt: now,
    updatedAt: now,
  };
}

const NO_TRANSITIONS: readonly Transition[] = Object.freeze([]);
const ALLOWED: Verdict = Object.freeze({ allowed: true });

function withoutTransition(circuit: Circuit): Step {
  return { circuit, transitions: NO_TRANSITIONS };
}

function chain(first: Step, next: (c: Circuit) => Step): Step {
  const second = next(first.circuit);
  if (first.transitions.length === 0) return second;
  return { circuit: second.circuit, transitions: [...first.transitions, ...second.transitions] };
}

/** The lazy open -> half-open transition: due once `now >= openUntil`. */
export function refresh(circuit: Circuit, now: EpochMs): Step {
  if (circuit.state !== 'open' || circuit.openUntil === null || now < circuit.openUntil) {
    return withoutTransition(circuit);
  }
  return {
    circuit: { ...circuit, state: 'half_open', halfOpenAt: now, probeLeases: [], updatedAt: now },
    transitions: [{ from: 'open', to: 'half_open', reason: 'open_timeout_elapsed', at: now }],
  };
}

/** Probe leases still held at `now`. */
export function activeLeases(circuit: Circuit, now: EpochMs): readonly EpochMs[] {
  return circuit.probeLeases.filter((expiresAt) => expiresAt > now);
}

export type Verdict =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly retryAt: EpochMs };

/** Read-only: may a call go ahead now? Expects a refreshed circuit. */
export function isCallAllowed(circuit: Circuit, now: EpochMs): Verdict {
  switch (circuit.state) {
    case 'closed':
      return ALLOWED;
    case 'open':
      return { allowed: false, retryAt: circuit.openUntil ?? now };
    case 'half_open': {
      const leases = activeLeases(circuit, now);
      if (leases.length < circuit.halfOpenMaxCalls) return ALLOWED;
      return { allowed: false, retryAt: Math.min(...leases) };
    }
    default:
      return assertNever(circuit.state);
  }
}

export interface Admission extends Step {
  readonly verdict: Verdict;
}

/**
 * Refresh, then decide; an admitted half-open call takes a probe slot until its outcome
 * is recorded or its lease runs out, so at most `halfOpenMaxCalls` probes are in flight.
 */
export function admit(circuit: Circuit, now: EpochMs, policy: BreakerPolicy): Admission {
  // The hot path (a healthy dependency) allocates one small object and nothing else.
  if (circuit.state === 'closed') return { circuit, transitions: NO_TRANSITIONS, verdict: ALLOWED };
  const refreshed = refresh(circuit, now);
  const c = refreshed.circuit;
  const verdict = isCallAllowed(c, now);
  if (!verdict.allowed || c.state !== 'half_open') return { ...refreshed, verdict };
  const leases = [...activeLeases(c, now), now + policy.probeLeaseMs];
  return { circuit: { ...c, probeLeases: leases, updatedAt: now }, transitions: refreshed.transitions, verdict };
}

export interface FailureOptions {
  /** Open time for this failure; remembered as the circuit's timeout. */
  readonly timeoutSeconds?: number;
}

/**
 * Count a failure. A failure while half-open, or one that brings the count to the
 * threshold, opens the circuit until `now + timeoutSeconds`.
 */
export function recordFailure(circuit: Circuit, now: EpochMs, options: FailureOptions = {}): Step {
  return chain(refresh(circuit, now), (c) => {
    const timeoutSeconds = options.timeoutSeconds ?? c.timeoutSeconds;
    const failureCount = c.failureCount + 1;
    const opens = c.state === 'half_open' || failureCount >= c.failureThreshold;
    if (!opens) {
      return withoutTransition({ ...c, failureCount, timeoutSeconds, lastFailureAt: now, updatedAt: now });
    }
    const opened: Circuit = {
      ...c,
      state: 'open',
      failureCount,
      timeoutSeconds,
      openUntil: now + timeoutSeconds * 1000,
      lastFailureAt: now,
      probeLeases: [],
      updatedAt: now,
    };
    if (c.state === 'open') return withoutTransition(opened); // a late failure extends the open time
    const reason: TransitionReason = c.state === 'half_open' ? 'probe_failed' : 'failure_threshold_reached';
    return { circuit: opened, transitions: [{ from: c.state, to: 'open', reason, at: now }] };
  });
}

/**
 * Count a success: from half-open, or with failures counted, back to closed with the
 * count at 0. A success on a closed circuit with no failures changes nothing.
 */
export function recordSuccess(circuit: Circuit, now: EpochMs): Step {
  return chain(refresh(circuit, now), (c) => {
    if (c.state === 'closed' && c.failureCount === 0) return withoutTransition(c);
    return close(c, now, c.state === 'half_open' ? 'probe_succeeded' : 'success_recorded');
  });
}

/** Operator reset: closed, count 0, whatever the state was. */
export function reset(circuit: Circuit, now: EpochMs): Step {
  if (circuit.state === 'closed' && circuit.failureCount === 0 && circuit.probeLeases.length === 0) {
    return withoutTransition(circuit);
  }
  return close(circuit, now, 'manual_reset');
}

function close(c: Circuit, now: EpochMs, reason: TransitionReason): Step {
  const closed: Circuit = {
    ...c,
    state: 'closed',
    failureCount: 0,
    openUntil: null,
    halfOpenAt: null,
    probeLeases: [],
    updatedAt: now,
  };
  if (c.state === 'closed') return withoutTransition(closed);
  return { circuit: closed, transitions: [{ from: c.state, to: 'closed', reason, at: now }] };
}

function assertNever(value: never): never {
  throw new Error(`unexpected state ${String(value)}`);
}
