import { describe, expect, it } from 'vitest';
import { newCircuit, type Circuit } from '../../src/domain/circuit.js';
import { isIdleCircuit } from '../../src/domain/idle.js';
import type { Bucket, WindowState } from '../../src/domain/window.js';

const DAY_MS = 86_400_000;
const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const NOW = T0 + 10 * DAY_MS;
const BEFORE = NOW - 7 * DAY_MS;
const settings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const unused = (extra: Partial<Circuit> = {}): Circuit => ({ ...newCircuit('svc', settings, T0), ...extra });

describe('isIdleCircuit: what idle deletion may delete', () => {
  it('deletes a closed, unforced circuit unchanged since before the cut-off', () => {
    expect(isIdleCircuit(unused(), BEFORE, NOW)).toBe(true);
  });

  it('keeps one changed since the cut-off, open, half-open or forced', () => {
    expect(isIdleCircuit(unused({ updatedAt: BEFORE }), BEFORE, NOW)).toBe(false);
    expect(isIdleCircuit(unused({ state: 'open', openUntil: T0 + 30_000 }), BEFORE, NOW)).toBe(false);
    expect(isIdleCircuit(unused({ state: 'half_open' }), BEFORE, NOW)).toBe(false);
    expect(isIdleCircuit(unused({ forcedState: 'closed' }), BEFORE, NOW)).toBe(false);
  });

  it('keeps one with an isolated caller, even long after its open time (it waits for its probe)', () => {
    const callers = [['bad', 1, T0, null, T0 + 30_000, 30, null] as const];
    expect(isIdleCircuit(unused({ callers }), BEFORE, NOW)).toBe(false);
    const healthy = [['ok', 1, T0, null, null, 0, null] as const]; // a failure remembered, not isolated
    expect(isIdleCircuit(unused({ callers: healthy }), BEFORE, NOW)).toBe(true);
  });

  it('keeps one with a probe lease in force, not one whose leases ran out', () => {
    expect(isIdleCircuit(unused({ probeLeases: [NOW + 5_000] }), BEFORE, NOW)).toBe(false);
    expect(isIdleCircuit(unused({ probeLeases: [BEFORE] }), BEFORE, NOW)).toBe(true);
  });

  it('keeps one whose throttle refuses calls now, not one whose throttle window has passed', () => {
    const throttle = { k: 2, windowSeconds: 60 };
    const second = Math.floor(NOW / 1000);
    const bucket = (at: number): Bucket => [at, 10, 10, 0]; // 10 requests, none accepted
    const refusing: WindowState = { type: 'time', buckets: [bucket(second)] };
    const past: WindowState = { type: 'time', buckets: [bucket(second - 600)] };
    expect(isIdleCircuit(unused({ throttle, throttleState: refusing }), BEFORE, NOW)).toBe(false);
    expect(isIdleCircuit(unused({ throttle, throttleState: past }), BEFORE, NOW)).toBe(true);
  });
});
