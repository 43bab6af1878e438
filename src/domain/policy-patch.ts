/** RFC 7396 merge patches of a policy's wire form (`PATCH /circuits/{name}/policy`). */
import type { CircuitPolicy } from './policy.js';
import { policyToWire } from './policy-wire.js';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** RFC 7396 section 2: a member set to null is removed; objects merge recursively; anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

// `min_deadline_ms: null` is a value (a caller's deadline never counts); `ramp: null` is off.
const NULLABLE = new Set(['window', 'backoff', 'forced_state', 'throttle', 'quorum', 'min_deadline_ms', 'ramp']);

/**
 * The policy after a merge patch, in wire form and unvalidated. A top-level field sent as
 * null means "none" for `window`, `backoff`, `forced_state`, `throttle` and `quorum`, and "the default" for the
 * others; inside `window`/`backoff` a null member returns to its default.
 */
export function patchedPolicy(
  current: CircuitPolicy,
  defaults: CircuitPolicy,
  patch: Record<string, unknown>,
): unknown {
  const merged = mergePatch(policyToWire(current, false), patch) as Record<string, unknown>;
  const fallback = policyToWire(defaults, false) as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) merged[key] = NULLABLE.has(key) ? null : fallback[key];
  }
  return merged;
}
