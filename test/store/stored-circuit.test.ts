import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { newCircuit, recordOutcome, type Circuit, type CircuitSettings } from '../../src/domain/circuit.js';
import { checkStoredCircuit } from '../../src/domain/circuit-record.js';
import { parseCircuit } from '../../src/store/redis/stored-circuit.js';

// A stored circuit read back from Redis is checked by the domain's record (circuit-record.ts)
// alone. The zod schema the Redis store used before is kept here as the reference: the record
// must accept exactly what it accepted and answer what it answered (every host runs the check
// on every other host's change message, so it is hand-written for speed).

const state = z.enum(['closed', 'open', 'half_open']);
const count = z.number().int().nonnegative();
const time = z.number().finite();
const seconds = z.number().nonnegative().finite();

/** The reference: what a `c:{name}` hash's `c` had to hold to be used, as zod. */
const storedCircuit = z.looseObject({
  name: z.string().min(1),
  state,
  failureCount: count,
  probeLeases: z.array(time),
  probeSuccesses: count,
  openUntil: time.nullable(),
  openTimeoutSeconds: seconds.nullable(),
  reopenCount: count,
  windowState: z
    .union([
      z.looseObject({ type: z.literal('count'), outcomes: z.string(), failures: count, slowCalls: count }),
      z.looseObject({ type: z.literal('time'), buckets: z.array(z.unknown()) }),
    ])
    .nullable(),
  halfOpenAt: time.nullable(),
  lastFailureAt: time.nullable(),
  stateChangedAt: time.nullable().optional(),
  createdAt: time,
  updatedAt: time,
  failureThreshold: z.number().int().positive(),
  timeoutSeconds: seconds,
  halfOpenMaxCalls: z.number().int().positive(),
  successThreshold: z.number().int().positive(),
  window: z.looseObject({ type: z.enum(['count', 'time']), size: z.number().int().positive() }).nullable(),
  backoff: z.looseObject({ multiplier: z.number().finite(), maxTimeoutSeconds: seconds }).nullable(),
  forcedState: z.enum(['open', 'closed']).nullable(),
  throttle: z
    .looseObject({ k: z.number().min(1).finite(), windowSeconds: z.number().int().positive() })
    .nullable()
    .default(null),
  throttleState: z
    .looseObject({ type: z.literal('time'), buckets: z.array(z.unknown()) })
    .nullable()
    .default(null),
  quorum: z
    .object({
      minCallers: z.number().int().min(2),
      windowSeconds: z.number().int().positive(),
      maxCallers: z.number().int().min(2),
    })
    .nullable()
    .optional(),
  callers: z
    .array(
      z.tuple([z.string().min(1), count, time.nullable(), time.nullable(), time.nullable(), seconds, time.nullable()]),
    )
    .optional(),
});

/** The reference's answer for a hash whose `c` is `json`: the circuit, or null (refused). */
function reference(name: string, id: string, json: string): Circuit | null {
  const parsed = storedCircuit.safeParse(JSON.parse(json));
  if (!parsed.success || parsed.data.name !== name) return null;
  return { ...parsed.data, id: Number(id) } as unknown as Circuit;
}

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

describe('parseCircuit (the record check of a stored circuit)', () => {
  it('accepts every circuit the domain writes, and answers exactly what the schema answers', () => {
    for (const c of domainCircuits()) {
      const json = JSON.stringify(c);
      const parsed = parseCircuit(c.name, String(c.id), json);
      expect(parsed).toEqual({ circuit: reference(c.name, String(c.id), json) });
    }
  });

  it('fills in the defaults of circuits stored before issues 15 and 21, as the schema does', () => {
    const { throttle: _t, throttleState: _s, stateChangedAt: _c, ...old } = domainCircuits()[0]!;
    const parsed = parseCircuit(old.name, '1', JSON.stringify(old));
    expect(parsed).toEqual({ circuit: reference(old.name, '1', JSON.stringify(old)) });
    expect('circuit' in parsed && parsed.circuit).toMatchObject({ throttle: null, throttleState: null });
    expect('circuit' in parsed && parsed.circuit).not.toHaveProperty('stateChangedAt');
  });

  it('accepts exactly what the schema accepts, and answers the same (any field, any value)', () => {
    const circuits = domainCircuits();
    const keys = [...new Set(circuits.flatMap((c) => Object.keys(c))), 'callers', 'quorum', 'extra'];
    const nestedKeys = ['type', 'size', 'outcomes', 'failures', 'slowCalls', 'buckets', 'k', 'windowSeconds'];
    // Any JSON, and the numbers near each rule's edges (JSON's doubles are seldom whole).
    const value = fc.oneof(
      fc.jsonValue(),
      fc.integer({ min: -3, max: 3 }),
      fc.constantFrom(-0.5, 0.5, 1.5, 2 ** 53, -(2 ** 53), 1e300, '', 'open', 'count', 'time'),
    );
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: circuits.length - 1 }),
        fc.constantFrom(...keys),
        fc.option(value, { nil: undefined }),
        fc.option(fc.tuple(fc.constantFrom(...nestedKeys, 'minCallers', 'maxCallers', 'extra'), value), {
          nil: undefined,
        }),
        (i, key, value, nested) => {
          const raw = copy(circuits[i]);
          if (nested !== undefined && raw[key] !== null && typeof raw[key] === 'object')
            raw[key][nested[0]] = nested[1];
          else if (value === undefined) delete raw[key];
          else raw[key] = value;
          const json = JSON.stringify(raw);
          const name = circuits[i]!.name;
          const expected = reference(name, '9', json);
          const parsed = parseCircuit(name, '9', json);
          if (expected === null) {
            refused++;
            expect(parsed).toHaveProperty('problem');
          } else {
            accepted++;
            expect(parsed).toEqual({ circuit: expected });
          }
        },
      ),
      { numRuns: 3_000 },
    );
    expect(accepted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });

  it('keeps a quorum to its three members, as the schema did', () => {
    const c = domainCircuits()[28]!;
    expect(c.quorum).not.toBeNull();
    const json = JSON.stringify({ ...c, quorum: { ...c.quorum, extra: 1 } });
    const parsed = parseCircuit(c.name, String(c.id), json);
    expect(parsed).toEqual({ circuit: reference(c.name, String(c.id), json) });
    expect('circuit' in parsed && parsed.circuit.quorum).toEqual(c.quorum);
  });

  it('refuses values that are not objects', () => {
    for (const v of [null, 1, 'x', [], [domainCircuits()[0]]]) {
      expect(checkStoredCircuit(v)).not.toHaveProperty('name');
      expect(parseCircuit('c0', '1', JSON.stringify(v))).toHaveProperty('problem');
    }
  });

  it('names the bad field and what it should be', () => {
    const bad = { ...domainCircuits()[0]!, failureCount: -1 };
    expect(schema(bad).success).toBe(false);
    expect(parseCircuit('c0', '1', JSON.stringify(bad))).toEqual({
      problem: 'the circuit (field c) has a bad failureCount: expected a whole number >= 0',
    });
    expect(parseCircuit('other', '1', JSON.stringify(domainCircuits()[0]))).toEqual({
      problem: 'the circuit (field c) is named "c0"',
    });
    expect(parseCircuit('c0', '7', JSON.stringify(domainCircuits()[0]))).toEqual({
      circuit: { ...schema(domainCircuits()[0]).data, id: 7 },
    });
  });
});
