import { describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit } from '../../src/domain/circuit.js';
import { refresh } from '../../src/domain/state-change.js';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import { TransitionHints } from '../../src/store/redis/transition-hint.js';

// A Redis host reads a shard's `transitions` stream at once when a change message's write
// probably made a transition; else the event waits for the feed's read of every shard (1 s),
// which let 20 clients keep calling a throttled dependency for up to a second
// (test/e2e/fleet-cool-down.test.ts on Redis).
const T0 = Date.parse('2026-01-01T00:00:00Z');

describe('TransitionHints', () => {
  it('reads the stream for a cool-down begun and for its end, though the state stays closed', () => {
    const hints = new TransitionHints();
    const quiet: Circuit = { ...newCircuit('dep', POLICY_DEFAULTS.circuit, T0), id: 1 };
    const success = recordOutcome(quiet, { success: true }, T0 + 1_000).circuit;
    expect(hints.probablyTransitioned('dep', success)).toBe(false);
    const cooled = recordOutcome(success, { success: false, kind: 'throttled', retryAfterSeconds: 3 }, T0 + 2_000);
    expect(cooled.transitions.map((t) => t.reason)).toEqual(['cool_down']);
    expect(hints.probablyTransitioned('dep', cooled.circuit)).toBe(true);
    const ended = refresh(cooled.circuit, T0 + 5_000);
    expect(ended.transitions.map((t) => t.reason)).toEqual(['cool_down_ended']);
    expect(hints.probablyTransitioned('dep', ended.circuit)).toBe(true);
    // The next plain write made none: no read.
    expect(hints.probablyTransitioned('dep', recordOutcome(ended.circuit, { success: true }, T0 + 6_000).circuit)).toBe(
      false,
    );
  });

  it('reads the stream for a state change, as before', () => {
    const hints = new TransitionHints();
    let c: Circuit = { ...newCircuit('dep', { ...POLICY_DEFAULTS.circuit, failureThreshold: 1 }, T0), id: 1 };
    c = recordOutcome(c, { success: false }, T0 + 1_000).circuit;
    expect(c.state).toBe('open');
    expect(hints.probablyTransitioned('dep', c)).toBe(true);
  });
});
