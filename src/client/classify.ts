/**
 * What a call's outcome was (issue 29, docs/client.md "Why a call failed"): the caller's own
 * `classify`, else `isFailure`, else what the client can see itself: an HTTP answer or an error
 * carrying a status (by `kindOfStatus`, the table the server and the proxy use), the caller's
 * own signal aborting (a deadline or a cancellation), a thrown error (failure) or a result (success).
 */

import { type OutcomeKind, isOutcomeKind } from '../domain/outcome-kind.js';
import { countedAs, kindOfStatus } from '../domain/outcome-rules.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import { type CircuitPolicy, resolvePolicy } from '../domain/policy.js';
import { policyFromJson } from '../domain/policy-wire.js';
import { CallTimeoutError } from './errors.js';
import type { OutcomeItem } from './transport.js';

/** What `classify` may return: a kind, or a kind with its detail; undefined for the default. */
export type Classification =
  | OutcomeKind
  | { readonly kind: OutcomeKind; readonly retryAfterSeconds?: number | null; readonly deadlineMs?: number }
  | undefined;

/** An outcome's kind and its detail, as it goes on the wire (checked: the server takes it). */
export interface Verdict {
  readonly kind: OutcomeKind;
  /** With `throttled`: the seconds the dependency asked for (integer >= 0); absent when it named none. */
  readonly retryAfterSeconds?: number;
  /** With `caller_deadline`: the caller's deadline in ms (integer >= 1). */
  readonly deadlineMs?: number;
  /** `classify` or `isFailure` threw (or returned something unusable): recorded as a failure, then thrown. */
  readonly classifierError?: unknown;
}

/** How the call ended, as `run` saw it. */
export interface Ending<T> {
  readonly thrown: { readonly error: unknown } | null;
  readonly result: T | undefined;
  /** The caller's own signal (option `signal`), if it gave one. */
  readonly signal: AbortSignal | undefined;
  /** Option `deadlineMs`: the caller's deadline, stated. */
  readonly deadlineMs: number | undefined;
  readonly durationMs: number;
  /** Epoch ms now, to read a `Retry-After` date against. */
  readonly now: number;
}

export interface Classifiers<T> {
  readonly classify?: (error: unknown, result: T | undefined) => Classification;
  readonly isFailure?: (error: unknown, result: T | undefined) => boolean;
}

export const SUCCESS: Verdict = Object.freeze({ kind: 'success' });
export const FAILURE: Verdict = Object.freeze({ kind: 'failure' });

/** The kind to record for a call that ended so; `classify` wins over `isFailure`, either over the default. */
export function verdictOf<T>(ending: Ending<T>, classifiers: Classifiers<T>): Verdict {
  const { thrown, result } = ending;
  // The client's own timeoutMs: the dependency did not answer in time, whatever a classifier says.
  if (thrown !== null && thrown.error instanceof CallTimeoutError) return FAILURE;
  const { classify, isFailure } = classifiers;
  if (classify !== undefined) {
    try {
      const c = thrown === null ? classify(undefined, result) : classify(thrown.error, undefined);
      if (c !== undefined) return checked(c);
    } catch (classifierError) {
      return { kind: 'failure', classifierError };
    }
  }
  if (isFailure !== undefined) {
    try {
      return (thrown === null ? isFailure(undefined, result) : isFailure(thrown.error, undefined)) ? FAILURE : SUCCESS;
    } catch (classifierError) {
      return { kind: 'failure', classifierError };
    }
  }
  return defaultVerdict(ending);
}

/** What the client classifies without help (the table in docs/client.md). */
export function defaultVerdict<T>(ending: Ending<T>): Verdict {
  const { thrown, result, signal, now } = ending;
  if (thrown === null) {
    const answer = httpAnswer(result);
    return answer === null ? SUCCESS : byStatus(answer.status, answer.retryAfter, now);
  }
  if (signal?.aborted === true) {
    if ((signal.reason as { name?: unknown } | null)?.name !== 'TimeoutError') return { kind: 'cancelled' };
    const deadlineMs = ending.deadlineMs ?? ending.durationMs;
    return { kind: 'caller_deadline', deadlineMs: Math.max(1, Math.round(deadlineMs)) };
  }
  const answer = statusOfError(thrown.error);
  return answer === null ? FAILURE : byStatus(answer.status, answer.retryAfter, now);
}

function byStatus(status: number, retryAfter: string | null, now: number): Verdict {
  const c = kindOfStatus(status, retryAfter, now);
  if (c.kind === 'success') return SUCCESS;
  if (c.kind === 'failure') return FAILURE;
  return c.retryAfterSeconds == null ? { kind: c.kind } : { kind: c.kind, retryAfterSeconds: c.retryAfterSeconds };
}

interface StatusAnswer {
  readonly status: number;
  readonly retryAfter: string | null;
}

const isStatus = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v >= 100 && v <= 599;

/** An HTTP answer object: fetch's `Response`, or anything with a numeric `status` and `headers.get`. */
function httpAnswer(value: unknown): StatusAnswer | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as { status?: unknown; headers?: { get?: unknown } | null };
  if (!isStatus(v.status) || typeof v.headers?.get !== 'function') return null;
  return { status: v.status, retryAfter: header(v.headers) };
}

/** An error carrying a status: undici's `statusCode`, a `status`, or a `response` (an HTTP answer). */
function statusOfError(error: unknown): StatusAnswer | null {
  if (typeof error !== 'object' || error === null) return null;
  const e = error as { statusCode?: unknown; status?: unknown; headers?: unknown; response?: unknown };
  const status = isStatus(e.statusCode) ? e.statusCode : isStatus(e.status) ? e.status : null;
  if (status !== null) return { status, retryAfter: header(e.headers) };
  const r = e.response as { status?: unknown; headers?: unknown } | null | undefined;
  if (typeof r === 'object' && r !== null && isStatus(r.status))
    return { status: r.status, retryAfter: header(r.headers) };
  return null;
}

/** `Retry-After` from a `Headers`-like object (`get`) or a plain record (undici's `headers`). */
function header(headers: unknown): string | null {
  if (typeof headers !== 'object' || headers === null) return null;
  const h = headers as { get?: unknown } & Record<string, unknown>;
  const value = typeof h.get === 'function' ? (h.get as (n: string) => unknown)('retry-after') : h['retry-after'];
  if (typeof value === 'string') return value;
  return Array.isArray(value) && typeof value[0] === 'string' ? value[0] : null;
}

/** A `classify` answer checked, so a bad one fails the call here rather than a whole batch at the server (422). */
function checked(c: NonNullable<Classification>): Verdict {
  const { kind, retryAfterSeconds, deadlineMs } =
    typeof c === 'string' ? { kind: c } : (c as Exclude<typeof c, string>);
  if (!isOutcomeKind(kind)) throw new TypeError(`classify() returned an unknown kind: ${String(kind)}`);
  const v: { kind: OutcomeKind; retryAfterSeconds?: number; deadlineMs?: number } = { kind };
  if (retryAfterSeconds != null) {
    if (kind !== 'throttled' || !(Number.isFinite(retryAfterSeconds) && retryAfterSeconds >= 0))
      throw new TypeError('classify(): retryAfterSeconds must be a number >= 0, and only with kind throttled');
    v.retryAfterSeconds = Math.ceil(retryAfterSeconds);
  }
  if (deadlineMs !== undefined) {
    if (kind !== 'caller_deadline' || !(Number.isFinite(deadlineMs) && deadlineMs > 0))
      throw new TypeError('classify(): deadlineMs must be a number > 0, and only with kind caller_deadline');
    v.deadlineMs = Math.max(1, Math.round(deadlineMs));
  }
  return v;
}

/**
 * What an outcome counts as for this client's own accounting (the local breaker while
 * circuitlog is unreachable, the soft throttle's counts): true a success, false a failure, null
 * nothing (a `throttled` outcome is the server's cool-down, never a count). The server's own rule
 * (`countedAs`, src/domain/outcome-rules.ts) over the circuit's policy as its JSON shows it
 * (`count_as`, `min_deadline_ms`, the window's `slow_call_duration_ms`), so the two never differ.
 */
export function countsLocally(
  verdict: Verdict,
  durationMs: number | undefined,
  json: Readonly<Record<string, unknown>> | null | undefined,
): boolean | null {
  const counted = countedAs(policyOfJson(json ?? null), {
    kind: verdict.kind,
    success: verdict.kind === 'success',
    ...(verdict.deadlineMs === undefined ? {} : { deadlineMs: verdict.deadlineMs }),
    ...(durationMs === undefined ? {} : { durationMs }),
  });
  return counted === 'success' ? true : counted === 'failure' ? false : null;
}

/** The policy a circuit's JSON shows, read once per JSON object (a view entry's JSON is replaced, never changed). */
function policyOfJson(json: Readonly<Record<string, unknown>> | null): CircuitPolicy {
  if (json === null) return DEFAULT_POLICY;
  let policy = policies.get(json);
  if (policy === undefined) policies.set(json, (policy = policyFromJson(json, DEFAULT_POLICY)));
  return policy;
}
const policies = new WeakMap<object, CircuitPolicy>();
const DEFAULT_POLICY: CircuitPolicy = resolvePolicy(POLICY_DEFAULTS.circuit);

/**
 * An outcome's fields on the wire: a plain success or failure as `success` (as every server
 * takes it), any other kind as `kind` with its detail and no `success` (issue 29's contract).
 */
export function outcomeWire(v: Verdict): Pick<OutcomeItem, 'success' | 'kind' | 'retry_after_seconds' | 'deadline_ms'> {
  if (v.kind === 'success' || v.kind === 'failure') return { success: v.kind === 'success' };
  return {
    kind: v.kind,
    ...(v.retryAfterSeconds === undefined ? {} : { retry_after_seconds: v.retryAfterSeconds }),
    ...(v.deadlineMs === undefined ? {} : { deadline_ms: v.deadlineMs }),
  };
}

/** A TypeError for a call option the client cannot use. */
export function checkCallOptions(options: { readonly deadlineMs?: number; readonly signal?: AbortSignal }): void {
  const { deadlineMs, signal } = options;
  if (deadlineMs !== undefined && !(Number.isFinite(deadlineMs) && deadlineMs > 0))
    throw new TypeError('call(): deadlineMs must be a finite number > 0');
  if (signal !== undefined && !(signal instanceof AbortSignal))
    throw new TypeError('call(): signal must be an AbortSignal');
}
