import type { Circuit, CircuitState } from '../../domain/circuit.js';
import type { BackoffPolicy, ForcedState, WindowPolicy } from '../../domain/policy.js';
import type { ThrottlePolicy, ThrottleState } from '../../domain/throttle.js';
import type { WindowState } from '../../domain/window.js';
import type { QuorumPolicy } from '../../domain/quorum.js';

/**
 * A row of the circuits table (snake_case columns, JSON text; migrations 0001-0004, 0006-0008). The
 * caller table is not in it: its entries are rows of `caller_entries` (caller-rows.ts).
 */
export interface CircuitRow {
  id: number;
  name: string;
  state: CircuitState;
  failure_count: number;
  failure_threshold: number;
  timeout_seconds: number;
  half_open_max_calls: number;
  probe_leases: string;
  open_until: number | null;
  half_open_at: number | null;
  last_failure_at: number | null;
  created_at: number;
  updated_at: number;
  success_threshold: number;
  window_policy: string | null;
  backoff_policy: string | null;
  forced_state: ForcedState | null;
  probe_successes: number;
  open_timeout_seconds: number | null;
  reopen_count: number;
  window_state: string | null;
  state_changed_at: number | null;
  throttle_policy: string | null;
  throttle_state: string | null;
  quorum_policy: string | null;
}

const NO_LEASES: readonly number[] = Object.freeze([]);

/** The circuit a row holds, without its caller table (see `CallerRows.attach`). */
export function fromRow(row: CircuitRow): Circuit {
  return {
    id: row.id,
    name: row.name,
    state: row.state,
    failureCount: row.failure_count,
    failureThreshold: row.failure_threshold,
    timeoutSeconds: row.timeout_seconds,
    halfOpenMaxCalls: row.half_open_max_calls,
    probeLeases: row.probe_leases === '[]' ? NO_LEASES : (JSON.parse(row.probe_leases) as number[]),
    openUntil: row.open_until,
    halfOpenAt: row.half_open_at,
    lastFailureAt: row.last_failure_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    successThreshold: row.success_threshold,
    window: row.window_policy === null ? null : (JSON.parse(row.window_policy) as WindowPolicy),
    backoff: row.backoff_policy === null ? null : (JSON.parse(row.backoff_policy) as BackoffPolicy),
    forcedState: row.forced_state,
    probeSuccesses: row.probe_successes,
    openTimeoutSeconds: row.open_timeout_seconds,
    reopenCount: row.reopen_count,
    windowState: row.window_state === null ? null : (JSON.parse(row.window_state) as WindowState),
    stateChangedAt: row.state_changed_at,
    throttle: row.throttle_policy === null ? null : (JSON.parse(row.throttle_policy) as ThrottlePolicy),
    throttleState: row.throttle_state === null ? null : (JSON.parse(row.throttle_state) as ThrottleState),
    // Issue 17, only when set: circuits without a quorum keep the shape they always had.
    ...(row.quorum_policy === null ? {} : { quorum: JSON.parse(row.quorum_policy) as QuorumPolicy }),
  };
}

/** A row of COLUMNS as values in that order (a `.raw()` statement): no object per row to build. */
export type CircuitValues = [
  number,
  string,
  CircuitState,
  number,
  number,
  number,
  number,
  string,
  number | null,
  number | null,
  number | null,
  number,
  number,
  number,
  string | null,
  string | null,
  ForcedState | null,
  number,
  number | null,
  number,
  string | null,
  number | null,
  string | null,
  string | null,
  string | null,
];

/**
 * The circuit a raw row holds, as `fromRow`: a page of 100 circuits read as arrays costs about
 * a third of what row objects cost (GET /circuits deep in a big table).
 */
export function fromValues(v: CircuitValues): Circuit {
  const [
    id,
    name,
    state,
    failureCount,
    failureThreshold,
    timeoutSeconds,
    halfOpenMaxCalls,
    leases,
    openUntil,
    halfOpenAt,
    lastFailureAt,
    createdAt,
    updatedAt,
    successThreshold,
    window,
    backoff,
    forcedState,
    probeSuccesses,
    openTimeoutSeconds,
    reopenCount,
    windowState,
    stateChangedAt,
    throttle,
    throttleState,
    quorum,
  ] = v;
  return {
    id,
    name,
    state,
    failureCount,
    failureThreshold,
    timeoutSeconds,
    halfOpenMaxCalls,
    probeLeases: leases === '[]' ? NO_LEASES : (JSON.parse(leases) as number[]),
    openUntil,
    halfOpenAt,
    lastFailureAt,
    createdAt,
    updatedAt,
    successThreshold,
    window: window === null ? null : (JSON.parse(window) as WindowPolicy),
    backoff: backoff === null ? null : (JSON.parse(backoff) as BackoffPolicy),
    forcedState,
    probeSuccesses,
    openTimeoutSeconds,
    reopenCount,
    windowState: windowState === null ? null : (JSON.parse(windowState) as WindowState),
    stateChangedAt,
    throttle: throttle === null ? null : (JSON.parse(throttle) as ThrottlePolicy),
    throttleState: throttleState === null ? null : (JSON.parse(throttleState) as ThrottleState),
    // As fromRow: circuits without a quorum keep the shape they always had.
    ...(quorum === null ? {} : { quorum: JSON.parse(quorum) as QuorumPolicy }),
  };
}

const json = (value: unknown) => (value === null ? null : JSON.stringify(value));

/** A circuit as its SQLite row (the statements' named parameters), without its caller table. */
export function toParams(c: Circuit) {
  return {
    id: c.id,
    name: c.name,
    state: c.state,
    failure_count: c.failureCount,
    failure_threshold: c.failureThreshold,
    timeout_seconds: c.timeoutSeconds,
    half_open_max_calls: c.halfOpenMaxCalls,
    probe_leases: c.probeLeases.length === 0 ? '[]' : JSON.stringify(c.probeLeases),
    open_until: c.openUntil,
    half_open_at: c.halfOpenAt,
    last_failure_at: c.lastFailureAt,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
    success_threshold: c.successThreshold,
    window_policy: json(c.window),
    backoff_policy: json(c.backoff),
    forced_state: c.forcedState,
    probe_successes: c.probeSuccesses,
    open_timeout_seconds: c.openTimeoutSeconds,
    reopen_count: c.reopenCount,
    window_state: json(c.windowState),
    state_changed_at: c.stateChangedAt ?? null,
    throttle_policy: json(c.throttle ?? null),
    throttle_state: json(c.throttleState ?? null),
    quorum_policy: c.quorum == null ? null : JSON.stringify(c.quorum),
  };
}

export const COLUMNS = `id, name, state, failure_count, failure_threshold, timeout_seconds, half_open_max_calls,
  probe_leases, open_until, half_open_at, last_failure_at, created_at, updated_at, success_threshold, window_policy,
  backoff_policy, forced_state, probe_successes, open_timeout_seconds, reopen_count, window_state, state_changed_at,
  throttle_policy, throttle_state, quorum_policy`;
