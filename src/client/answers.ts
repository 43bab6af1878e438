/**
 * circuitlog's answers, read leniently: a field missing or of the wrong type takes a safe
 * default, an unusable event is skipped (an older or newer server, or a proxy in between).
 */

import type { CircuitState } from '../domain/circuit.js';
import type { AllowedAnswer, StreamReset, TransitionEvent } from './transport.js';

const STATES: readonly string[] = ['closed', 'open', 'half_open'];

/**
 * The longest a refusal is believed: `Retry-After` and `open_until` past it are cut to it (1 day),
 * so a hostile or broken answer cannot make a retry time no `Date` can hold (a RangeError in the
 * fallback path), and the circuit is asked again within a day at the latest.
 */
export const MAX_RETRY_MS = 24 * 60 * 60 * 1000; // 1 day

export function isProblem(body: unknown): boolean {
  return typeof (body as { code?: unknown } | null)?.code === 'string';
}

export function isOpenProblem(body: unknown): body is Record<string, unknown> {
  const code = (body as { code?: unknown } | null)?.code;
  return code === 'CIRCUIT_OPEN' || code === 'CIRCUIT_FORCED_OPEN' || code === 'CIRCUIT_THROTTLED';
}

function stateOf(value: unknown, fallback: CircuitState): CircuitState {
  return typeof value === 'string' && STATES.includes(value) ? (value as CircuitState) : fallback;
}

export function allowedAnswer(body: unknown): AllowedAnswer {
  const b = (body ?? {}) as Record<string, unknown>;
  const circuit = typeof b.circuit === 'object' && b.circuit !== null ? (b.circuit as Record<string, unknown>) : null;
  return { allowed: true, state: stateOf(b.state, 'closed'), circuit };
}

export function refusal(
  body: Record<string, unknown>,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): AllowedAnswer {
  const forced = body.code === 'CIRCUIT_FORCED_OPEN';
  const state = stateOf(body.state, 'open');
  const now = Date.now();
  const openUntil = Math.min(
    typeof body.open_until === 'string' ? Date.parse(body.open_until) : NaN,
    now + MAX_RETRY_MS,
  );
  const retryAfterSeconds = Number(headers['retry-after']);
  const retryAfterMs = Math.min(
    (Number.isFinite(retryAfterSeconds) && retryAfterSeconds >= 0 ? retryAfterSeconds : 1) * 1000,
    MAX_RETRY_MS,
  );
  const retryAt = !forced && state === 'open' && Number.isFinite(openUntil) ? openUntil : now + retryAfterMs;
  if (body.code === 'CIRCUIT_THROTTLED') {
    const p = body.throttle_probability;
    return {
      allowed: false,
      state: 'closed',
      retryAt,
      retryAfterMs,
      forced: false,
      throttled: { probability: typeof p === 'number' && p >= 0 && p < 1 ? p : 0 },
    };
  }
  // A caller's isolation has its own open_until, whatever the circuit's state.
  if (body.scope === 'caller' && Number.isFinite(openUntil))
    return { allowed: false, state, retryAt: openUntil, retryAfterMs, forced, scope: 'caller' };
  return { allowed: false, state, retryAt, retryAfterMs, forced };
}

export function parseReset(data: string): StreamReset | null {
  try {
    const d = JSON.parse(data) as Record<string, unknown>;
    const newestId = d.newest_id;
    // A number (SQLite's transition id) or, on Redis, a cursor of numbers joined by dots: opaque either way.
    const valid =
      typeof newestId === 'number'
        ? Number.isSafeInteger(newestId) && newestId >= 0
        : typeof newestId === 'string' && /^\d+(\.\d+)*$/.test(newestId);
    if (!valid) return null;
    return { reason: typeof d.reason === 'string' ? d.reason : 'unknown', newestId: String(newestId) };
  } catch {
    return null;
  }
}

export function parseTransition(data: string, id: string): TransitionEvent | null {
  try {
    const d = JSON.parse(data) as Record<string, unknown>;
    if (typeof d.circuit !== 'string' || typeof d.to !== 'string') return null;
    return {
      id,
      circuit: d.circuit,
      from: stateOf(d.from, 'closed'),
      to: stateOf(d.to, 'closed'),
      reason: String(d.reason ?? ''),
      at: String(d.at ?? ''),
      ...(Array.isArray(d.callers) && d.callers.every((c) => typeof c === 'string')
        ? { callers: d.callers as string[] }
        : {}),
      ...(typeof d.until === 'string' ? { until: d.until } : {}),
    };
  } catch {
    return null;
  }
}
