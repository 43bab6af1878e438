import type { AuditAction } from '../domain/audit-entry.js';
import type { Circuit } from '../domain/circuit.js';
import { policyToWire } from '../domain/policy-wire.js';

/**
 * What an entry shows of a circuit: its state, failure count and policy, in wire names
 * (`forced_state` among them), and its shadow policy when it has one (issue 31).
 */
export function circuitValues(c: Circuit): Record<string, unknown> {
  const values = { state: c.state, failure_count: c.failureCount, ...policyToWire(c, false) };
  return c.shadow == null ? values : { ...values, shadow: policyToWire(c.shadow.circuit, false) };
}

/** The members whose values differ, before and after (both empty when nothing changed). */
export function changedValues(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
): { before: Record<string, unknown>; after: Record<string, unknown> } {
  const was: Record<string, unknown> = {};
  const now: Record<string, unknown> = {};
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (JSON.stringify(before[key] ?? null) === JSON.stringify(after[key] ?? null)) continue;
    was[key] = before[key] ?? null;
    now[key] = after[key] ?? null;
  }
  return { before: was, after: now };
}

/**
 * The entry of a PATCH: `circuit_created` (before null, after the whole circuit) for a new
 * circuit; a force set or cleared (`forced_open`, `forced_closed`, `force_cleared`) when
 * `forced_state` changed; else `policy_changed`. `before`/`after` hold the values that changed.
 */
export function patchChange(
  before: Circuit | null,
  after: Circuit,
): { action: AuditAction; before: unknown; after: unknown } {
  if (before === null) return { action: 'circuit_created', before: null, after: circuitValues(after) };
  const changed = changedValues(circuitValues(before), circuitValues(after));
  const action: AuditAction =
    before.forcedState === after.forcedState
      ? 'policy_changed'
      : after.forcedState === 'open'
        ? 'forced_open'
        : after.forcedState === 'closed'
          ? 'forced_closed'
          : 'force_cleared';
  return { action, ...changed };
}
