import type { Logger } from 'pino';
import { z } from 'zod';
import type { Circuit, CircuitState } from '../../domain/circuit.js';
import type { Versioned } from './redis-cache.js';
import { quickCircuit } from './circuit-check.js';

const state = z.enum(['closed', 'open', 'half_open']);
const count = z.number().int().nonnegative();
const time = z.number().finite();
const seconds = z.number().nonnegative().finite();

/**
 * What a `c:{name}` hash's `c` must hold to be used: every field the state machine reads,
 * with its type. Nested policy objects are checked for their shape's key fields; anything
 * else in them is the domain's (it wrote them).
 */
export const storedCircuit = z.looseObject({
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
  stateChangedAt: time.nullable().optional(), // absent on circuits stored before issue 15
  createdAt: time,
  updatedAt: time,
  failureThreshold: z.number().int().positive(),
  timeoutSeconds: seconds,
  halfOpenMaxCalls: z.number().int().positive(),
  successThreshold: z.number().int().positive(),
  window: z.looseObject({ type: z.enum(['count', 'time']), size: z.number().int().positive() }).nullable(),
  backoff: z.looseObject({ multiplier: z.number().finite(), maxTimeoutSeconds: seconds }).nullable(),
  forcedState: z.enum(['open', 'closed']).nullable(),
  // Absent on circuits stored before issue 21: no throttle.
  throttle: z
    .looseObject({ k: z.number().min(1).finite(), windowSeconds: z.number().int().positive() })
    .nullable()
    .default(null),
  throttleState: z
    .looseObject({ type: z.literal('time'), buckets: z.array(z.unknown()) })
    .nullable()
    .default(null),
  // Issue 17; absent on circuits without a quorum.
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

const wholeNumber = /^[1-9]\d{0,15}$/;

/** Why a stored circuit cannot be used, or null with the circuit. */
export function parseCircuit(
  name: string,
  id: string | null | undefined,
  json: string | null | undefined,
): { circuit: Circuit } | { problem: string } {
  if (id == null || !wholeNumber.test(id))
    return { problem: `id ${JSON.stringify(id ?? null)} is not a positive whole number` };
  if (json == null) return { problem: 'the circuit (field c) is missing' };
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    return { problem: 'the circuit (field c) is not JSON' };
  }
  // The common case (a circuit as the domain writes it) is checked without the schema's copies;
  // anything else goes to the schema, which decides (circuit-check.ts).
  let data = quickCircuit(raw) as { name: string } | null;
  if (data === null) {
    const parsed = storedCircuit.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      return { problem: `the circuit (field c) has a bad ${issue.path.join('.') || 'value'}: ${issue.message}` };
    }
    data = parsed.data;
  }
  if (data.name !== name) return { problem: `the circuit (field c) is named ${JSON.stringify(data.name)}` };
  const circuit = data as unknown as Circuit;
  return { circuit: circuit.id === Number(id) ? circuit : { ...circuit, id: Number(id) } };
}

const WARNED_MAX = 1_000; // names remembered as warned about: bounds memory against many bad keys

/**
 * Malformed data in Redis is skipped and logged once per key (until the key is good again),
 * never thrown: one bad value must not stop the listing, the start or the cache.
 */
export class Malformed {
  private readonly warned = new Set<string>();

  constructor(private readonly logger: Logger) {}

  report(key: string, problem: string): void {
    if (this.warned.has(key)) return;
    if (this.warned.size >= WARNED_MAX) this.warned.clear();
    this.warned.add(key);
    this.logger.warn(
      { event: 'redis_malformed', key, problem },
      `skipping malformed data in Redis at ${key}: ${problem}`,
    );
  }

  /** The key is good (again): a later corruption is worth a warning of its own. */
  clear(key: string): void {
    this.warned.delete(key);
  }

  /**
   * A versioned read of `c:{name}` (`HMGET v id c`): absent, a circuit, or corrupt. A corrupt
   * hash reads as absent (a call creates the circuit afresh and its write replaces the hash:
   * `corruptVersion` is what the compare-and-set must find there).
   */
  versioned(key: string, name: string, [v, id, json]: (string | null)[]): Versioned {
    if (v == null && id == null && json == null) return { version: 0, circuit: null };
    const parsed = parseCircuit(name, id, json);
    const version = v != null && wholeNumber.test(v) ? Number(v) : 0;
    if ('circuit' in parsed && v != null && wholeNumber.test(v)) {
      this.clear(key);
      return { version, circuit: parsed.circuit };
    }
    this.report(
      key,
      'problem' in parsed ? parsed.problem : `version ${JSON.stringify(v)} is not a positive whole number`,
    );
    return { version, circuit: null, corruptVersion: v ?? '0' };
  }
}

export const isState = (s: unknown): s is CircuitState => s === 'closed' || s === 'open' || s === 'half_open';
export const isWhole = (s: string): boolean => wholeNumber.test(s);
