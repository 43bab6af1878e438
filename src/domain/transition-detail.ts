/**
 * The members of an event beyond `from`, `to`, `reason` and `at` (issue 17: the callers a
 * quorum or an isolation names, the rule a withheld trip withheld, a caller's open time, the
 * detect-only mark) as the stores keep them: one small JSON object, absent when empty.
 * Read back from storage it is untrusted: `parseTransitionDetail` keeps only well-formed members.
 */
import { callerProblem } from './caller.js';
import type { EpochMs, Transition, TripReason } from './types.js';

export interface TransitionDetail {
  readonly callers?: readonly string[];
  readonly rule?: TripReason;
  readonly until?: EpochMs;
  readonly forcedState?: 'closed';
  /** Issue 29: a cool-down's scope and seconds, the ramp's end. */
  readonly scope?: 'circuit' | 'caller';
  readonly retryAfterSeconds?: number;
  readonly rampUntil?: EpochMs;
  /** Issue 30: who made a manual transition (a credential id, `anonymous`). */
  readonly by?: string;
  /** Issue 31: a transition of the circuit's shadow policy (the live circuit did not change). */
  readonly shadow?: true;
}

/** The longest `by` kept from storage (an identity id is far shorter). */
const BY_MAX_LENGTH = 256;

const RULES: ReadonlySet<string> = new Set([
  'failure_threshold_reached',
  'failure_rate_exceeded',
  'slow_call_rate_exceeded',
]);

/** The detail of a transition as JSON text, or null when it has none (every transition before issue 17). */
export function detailText(t: Transition): string | null {
  if (
    t.callers === undefined &&
    t.rule === undefined &&
    t.until === undefined &&
    t.forcedState === undefined &&
    t.scope === undefined &&
    t.rampUntil === undefined &&
    t.by === undefined &&
    t.shadow === undefined
  )
    return null;
  const d: Record<string, unknown> = {};
  if (t.callers !== undefined) d.callers = t.callers;
  if (t.rule !== undefined) d.rule = t.rule;
  if (t.until !== undefined) d.until = t.until;
  if (t.forcedState !== undefined) d.forcedState = t.forcedState;
  if (t.scope !== undefined) d.scope = t.scope;
  if (t.retryAfterSeconds !== undefined) d.retryAfterSeconds = t.retryAfterSeconds;
  if (t.rampUntil !== undefined) d.rampUntil = t.rampUntil;
  if (t.by !== undefined) d.by = t.by;
  if (t.shadow === true) d.shadow = true;
  return JSON.stringify(d);
}

/** The well-formed members of stored detail text (null, bad JSON or bad members: none). */
export function parseTransitionDetail(text: string | null | undefined): TransitionDetail {
  if (text == null || text === '') return {};
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return {};
  }
  if (typeof raw !== 'object' || raw === null) return {};
  const r = raw as Record<string, unknown>;
  const out: { -readonly [K in keyof TransitionDetail]: TransitionDetail[K] } = {};
  if (Array.isArray(r.callers) && r.callers.every((c) => typeof c === 'string' && callerProblem(c) === null))
    out.callers = r.callers as string[];
  if (typeof r.rule === 'string' && RULES.has(r.rule)) out.rule = r.rule as TripReason;
  if (typeof r.until === 'number' && Number.isFinite(r.until)) out.until = r.until;
  if (r.forcedState === 'closed') out.forcedState = 'closed';
  if (r.scope === 'circuit' || r.scope === 'caller') out.scope = r.scope;
  if (Number.isSafeInteger(r.retryAfterSeconds) && (r.retryAfterSeconds as number) >= 0)
    out.retryAfterSeconds = r.retryAfterSeconds as number;
  if (typeof r.rampUntil === 'number' && Number.isFinite(r.rampUntil)) out.rampUntil = r.rampUntil;
  if (typeof r.by === 'string' && r.by.length > 0 && r.by.length <= BY_MAX_LENGTH) out.by = r.by;
  if (r.shadow === true) out.shadow = true;
  return out;
}

/** The detail's members in the API's wire form (`/events`, the SSE stream): snake_case, ISO 8601 times; only those set. */
export function detailWire(d: TransitionDetail): DetailWire {
  const out: DetailWire = {};
  if (d.callers !== undefined) out.callers = d.callers;
  if (d.rule !== undefined) out.rule = d.rule;
  if (d.until !== undefined) out.until = new Date(d.until).toISOString();
  if (d.forcedState !== undefined) out.forced_state = d.forcedState;
  if (d.scope !== undefined) out.scope = d.scope;
  if (d.retryAfterSeconds !== undefined) out.retry_after_seconds = d.retryAfterSeconds;
  if (d.rampUntil !== undefined) out.ramp_until = new Date(d.rampUntil).toISOString();
  if (d.by !== undefined) out.by = d.by;
  if (d.shadow === true) out.shadow = true;
  return out;
}

/** An event's detail on the wire. */
export interface DetailWire {
  callers?: readonly string[];
  rule?: TripReason;
  until?: string;
  forced_state?: 'closed';
  scope?: 'circuit' | 'caller';
  retry_after_seconds?: number;
  ramp_until?: string;
  by?: string;
  shadow?: true;
}
