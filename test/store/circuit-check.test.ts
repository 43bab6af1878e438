import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit, type CircuitSettings } from '../../src/domain/circuit.js';
import { quickCircuit } from '../../src/store/redis/circuit-check.js';
import { parseCircuit, storedCircuit } from '../../src/store/redis/stored-circuit.js';

// The fast check of a stored circuit (every host runs it on every other host's change message)
// must accept only what the schema accepts and answer what the schema answers; whatever it is
// unsure of goes to the schema, so parseCircuit's answers (and its messages) stay the schema's.

const BASE = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 2 };
const RATES = { failureRateThreshold: 50, slowCallDurationMs: 3, slowCallRateThreshold: 80 };
const SETTINGS: CircuitSettings[] = [
  BASE,
  {
    ...BASE,
    window: { type: 'count', size: 10, minimumCalls: null, ...RATES },
    backoff: { multiplier: 2, maxTimeoutSeconds: 300 },
  },
  { ...BASE, window: { type: 'time', size: 60, minimumCalls: 5, ...RATES }, successThreshold: 2 },
  { ...BASE, throttle: { k: 1.5, windowSeconds: 60 } },
  { ...BASE, quorum: { minCallers: 2, windowSeconds: 60, maxCallers: 100 }, forcedState: 'closed' },
];

/** Circuits as the domain writes them: fresh, after failures (open), after successes. */
function domainCircuits(): Circuit[] {
  const out: Circuit[] = [];
  SETTINGS.forEach((settings, i) => {
    let c: Circuit = { ...newCircuit(`c${i}`, settings, 1_000), id: i + 1 };
    out.push(c);
    for (let t = 0; t < 6; t++) {
      c = recordOutcome(c, { success: t % 4 === 3, durationMs: 5 }, 2_000 + t * 700).circuit;
      out.push(c);
    }
  });
  const withCallers = { ...out[out.length - 1]!, callers: [['api', 2, 1_000, null, null, 30, null]] };
  return [...out, withCallers as unknown as Circuit];
}

const schema = (raw: unknown) => storedCircuit.safeParse(raw);
const copy = (v: unknown) => JSON.parse(JSON.stringify(v));

describe('quickCircuit', () => {
  it('accepts every circuit the domain writes, and answers exactly what the schema answers', () => {
    for (const c of domainCircuits()) {
      const quick = quickCircuit(copy(c));
      const slow = schema(copy(c));
      expect(slow.success).toBe(true);
      expect(quick).not.toBeNull();
      expect(quick).toEqual(slow.data);
    }
  });

  it('fills in the defaults of circuits stored before issues 15 and 21, as the schema does', () => {
    const { throttle: _t, throttleState: _s, stateChangedAt: _c, ...old } = domainCircuits()[0]!;
    const quick = quickCircuit(copy(old));
    expect(quick).toEqual(schema(copy(old)).data);
    expect(quick).toMatchObject({ throttle: null, throttleState: null });
    expect(quick).not.toHaveProperty('stateChangedAt');
  });

  it('never accepts what the schema refuses, and answers the same where both accept (any field, any value)', () => {
    const circuits = domainCircuits();
    const keys = [...new Set(circuits.flatMap((c) => Object.keys(c))), 'callers', 'quorum', 'extra'];
    const nestedKeys = ['type', 'size', 'outcomes', 'failures', 'slowCalls', 'buckets', 'k', 'windowSeconds'];
    let accepted = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: circuits.length - 1 }),
        fc.constantFrom(...keys),
        fc.option(fc.jsonValue(), { nil: undefined }),
        fc.option(fc.tuple(fc.constantFrom(...nestedKeys), fc.jsonValue()), { nil: undefined }),
        (i, key, value, nested) => {
          const raw = copy(circuits[i]);
          if (nested !== undefined && raw[key] !== null && typeof raw[key] === 'object')
            raw[key][nested[0]] = nested[1];
          else if (value === undefined) delete raw[key];
          else raw[key] = value;
          const quick = quickCircuit(copy(raw));
          const slow = schema(copy(raw));
          if (quick !== null) {
            accepted++;
            expect(slow.success).toBe(true);
            expect(quick).toEqual(slow.data);
          }
        },
      ),
      { numRuns: 3_000 },
    );
    expect(accepted).toBeGreaterThan(0);
  });

  it('refuses values that are not objects', () => {
    for (const v of [null, 1, 'x', [], [domainCircuits()[0]]]) expect(quickCircuit(v)).toBeNull();
  });
});

describe('parseCircuit', () => {
  it('still names the bad field with the schema own message when the fast check is unsure', () => {
    const bad = { ...domainCircuits()[0]!, failureCount: -1 };
    expect(parseCircuit('c0', '1', JSON.stringify(bad))).toEqual({
      problem: `the circuit (field c) has a bad failureCount: ${schema(bad).error!.issues[0]!.message}`,
    });
    expect(parseCircuit('other', '1', JSON.stringify(domainCircuits()[0]))).toEqual({
      problem: 'the circuit (field c) is named "c0"',
    });
    expect(parseCircuit('c0', '7', JSON.stringify(domainCircuits()[0]))).toEqual({
      circuit: { ...schema(domainCircuits()[0]).data, id: 7 },
    });
  });
});
