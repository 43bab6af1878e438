import type { Logger } from 'pino';
import { checkStoredCircuit, BadRecord } from '../../domain/circuit-record.js';
import type { Circuit, CircuitState } from '../../domain/circuit.js';
import type { Versioned } from './redis-cache.js';

const wholeNumber = /^[1-9]\d{0,15}$/;

const isTimeOrNull = (v: unknown): boolean => v === null || (typeof v === 'number' && Number.isFinite(v));
const isCount = (v: unknown): boolean => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * The caller table the JSON may carry (`[caller, failures, failedAt, slowAt, isolatedUntil,
 * isolatedSeconds, probeUntil]` each, `domain/caller-state.ts`): not part of the circuit's record.
 */
function isCallers(v: unknown): boolean {
  if (v === undefined) return true;
  if (!Array.isArray(v)) return false;
  for (const e of v) {
    if (!Array.isArray(e) || e.length !== 7) return false;
    if (typeof e[0] !== 'string' || e[0].length === 0 || !isCount(e[1])) return false;
    if (typeof e[5] !== 'number' || !Number.isFinite(e[5]) || e[5] < 0) return false;
    if (!isTimeOrNull(e[2]) || !isTimeOrNull(e[3]) || !isTimeOrNull(e[4]) || !isTimeOrNull(e[6])) return false;
  }
  return true;
}

/** Why a stored circuit cannot be used, or the circuit (checked by the domain's record, `circuit-record.ts`). */
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
  const circuit = checkStoredCircuit(raw);
  if (circuit instanceof BadRecord) return { problem: `the circuit (field c) has a bad ${circuit.message}` };
  if (!isCallers(circuit.callers))
    return {
      problem:
        'the circuit (field c) has a bad callers: expected [[caller, failures, failedAt, slowAt, isolatedUntil, isolatedSeconds, probeUntil]]',
    };
  if (circuit.name !== name) return { problem: `the circuit (field c) is named ${JSON.stringify(circuit.name)}` };
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
