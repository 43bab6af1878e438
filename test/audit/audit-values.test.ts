import { describe, expect, it } from 'vitest';
import { patchChange } from '../../src/audit/audit-values.js';
import { AUDIT_VALUE_MAX_BYTES, auditValueText } from '../../src/domain/audit-entry.js';
import { newCircuit } from '../../src/domain/circuit.js';
import { resolvePolicy } from '../../src/domain/policy.js';

const circuit = (fields = {}) =>
  newCircuit(
    'pay',
    { ...resolvePolicy({ failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 }), ...fields },
    0,
  );

describe('audit values', () => {
  it('keeps a value whole up to AUDIT_VALUE_MAX_BYTES of JSON, a marker with its size past it', () => {
    const whole = { text: 'é'.repeat(1_000) };
    expect(auditValueText(whole)).toBe(JSON.stringify(whole));
    const big = { text: 'é'.repeat(AUDIT_VALUE_MAX_BYTES) }; // 2 bytes a character in UTF-8
    expect(JSON.parse(auditValueText(big)!)).toEqual({ truncated: true, bytes: AUDIT_VALUE_MAX_BYTES * 2 + 11 });
    expect(auditValueText(null)).toBeNull();
  });

  it('names a PATCH by what it changed: a force wins over the policy fields changed with it', () => {
    const before = circuit();
    expect(patchChange(before, circuit({ failureThreshold: 9 }))).toEqual({
      action: 'policy_changed',
      before: { failure_threshold: 5 },
      after: { failure_threshold: 9 },
    });
    expect(patchChange(before, circuit({ failureThreshold: 9, forcedState: 'open' }))).toEqual({
      action: 'forced_open',
      before: { failure_threshold: 5, forced_state: null },
      after: { failure_threshold: 9, forced_state: 'open' },
    });
    expect(patchChange(before, before)).toEqual({ action: 'policy_changed', before: {}, after: {} });
    expect(patchChange(null, before).action).toBe('circuit_created');
  });
});
