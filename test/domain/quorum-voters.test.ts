/**
 * Issue 30: a quorum counts distinct credentials (voters), not caller names. One credential
 * reporting as many callers is one vote; isolation still works per caller name; an entry with
 * no voter (no credentials configured) counts as its own name, as before.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { callerEntries, findCaller } from '../../src/domain/caller-state.js';
import { admit, newCircuit, recordOutcome, type Circuit, type Outcome } from '../../src/domain/circuit.js';
import { quorumCallers, quorumVoterCount, type QuorumPolicy } from '../../src/domain/quorum.js';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const lease = { probeLeaseMs: 5_000 };
const quorum: QuorumPolicy = { minCallers: 3, windowSeconds: 60, maxCallers: 1_000 };
const base = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1, quorum };

const fail = (caller: string, voter?: string): Outcome => ({
  success: false,
  late: 'count_only',
  caller,
  ...(voter === undefined ? {} : { voter }),
});

function feed(c: Circuit, outcomes: readonly Outcome[], now = T0): Circuit {
  for (const o of outcomes) c = recordOutcome(c, o, now).circuit;
  return c;
}

describe('quorum with credentials: distinct voters, not caller names', () => {
  it('never opens on one credential reporting failures as 5 caller names, 100 times', () => {
    let c = newCircuit('svc', base, T0);
    const opened: string[] = [];
    for (let i = 0; i < 100; i++) {
      const step = recordOutcome(c, fail(`mallory/pod-${i % 5}`, 'mallory'), T0 + i);
      c = step.circuit;
      for (const t of step.transitions) if (t.to === 'open') opened.push(t.reason);
    }
    expect(opened).toEqual([]);
    expect(c.state).toBe('closed');
    // The 5 names are all there (isolation is per name), with one voter between them.
    expect(quorumCallers(callerEntries(c), 'failure', quorum, T0 + 100)).toHaveLength(5);
    expect(quorumVoterCount(callerEntries(c), 'failure', quorum, T0 + 100)).toBe(1);
    expect(admit(c, T0 + 100, lease, 'checkout/pod-1').verdict.allowed).toBe(true);
  });

  it('opens at once when 3 credentials failed', () => {
    const c = feed(newCircuit('svc', base, T0), [fail('a/1', 'a'), fail('b/1', 'b'), fail('c/1', 'c')]);
    expect(c.state).toBe('open');
  });

  it('counts an entry with no voter as its own name (no credentials: today’s rule)', () => {
    const c = feed(newCircuit('svc', base, T0), [fail('x'), fail('y'), fail('z')]);
    expect(c.state).toBe('open');
    expect(callerEntries(c).every((e) => e.length === 7)).toBe(true);
  });

  it('keeps the voter on the entry, and the isolation per caller name', () => {
    const c = feed(newCircuit('svc', base, T0), [fail('m/1', 'm'), fail('m/1', 'm'), fail('m/1', 'm')]);
    expect(findCaller(callerEntries(c), 'm/1')?.[7]).toBe('m');
    // m/1 is isolated alone; m/2 (same credential) and everyone else are not.
    expect(admit(c, T0, lease, 'm/1').verdict).toMatchObject({ allowed: false, scope: 'caller' });
    expect(admit(c, T0, lease, 'm/2').verdict.allowed).toBe(true);
    // A probe slot taken keeps the voter.
    const probed = admit(c, T0 + 31_000, lease, 'm/1').circuit;
    expect(findCaller(callerEntries(probed), 'm/1')?.[7]).toBe('m');
  });
});

const CALLERS = ['a', 'b', 'c', 'd', 'e'] as const;
const VOTERS = ['v1', 'v2', 'v3'] as const;

describe('quorum voter properties', () => {
  it('opens only with min_callers distinct voters in the window, and never with one voter', () => {
    const owner = fc.record({
      a: fc.constantFrom(...VOTERS),
      b: fc.constantFrom(...VOTERS),
      c: fc.constantFrom(...VOTERS),
      d: fc.constantFrom(...VOTERS),
      e: fc.constantFrom(...VOTERS),
    });
    const action = fc.record({
      caller: fc.constantFrom(...CALLERS),
      success: fc.boolean(),
      dtMs: fc.integer({ min: 0, max: 8_000 }),
    });
    const q = fc.record<QuorumPolicy>({
      minCallers: fc.integer({ min: 2, max: 3 }),
      windowSeconds: fc.integer({ min: 1, max: 60 }),
      maxCallers: fc.constant(1_000),
    });
    fc.assert(
      fc.property(q, owner, fc.array(action, { maxLength: 120 }), (qp, owners, actions) => {
        let c = newCircuit('svc', { ...base, failureThreshold: 2, quorum: qp }, T0);
        let now = T0;
        const failedAt = new Map<string, number>(); // voter -> last failure
        for (const a of actions) {
          now += a.dtMs;
          const voter = owners[a.caller];
          const step = recordOutcome(c, { success: a.success, late: 'count_only', caller: a.caller, voter }, now);
          if (!a.success) failedAt.set(voter, now);
          for (const t of step.transitions) {
            if (t.from !== 'closed' || t.to !== 'open') continue;
            const from = now - qp.windowSeconds * 1000;
            const voters = [...failedAt].filter(([, at]) => at >= from).length;
            expect(voters).toBeGreaterThanOrEqual(qp.minCallers);
            expect(new Set(Object.values(owners)).size).toBeGreaterThan(1);
          }
          c = step.circuit;
        }
      }),
      { numRuns: 300 },
    );
  });
});
