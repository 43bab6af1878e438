import { describe, expect, it } from 'vitest';
import {
  BadRecord,
  checkStoredCircuit,
  circuitFromColumns,
  circuitToColumns,
  circuitToJson,
  RECORD_COLUMNS,
  RECORD_FIELDS,
  UPDATED_COLUMNS,
} from '../../src/domain/circuit-record.js';
import { admit, newCircuit, recordOutcome, type Circuit, type CircuitSettings } from '../../src/domain/circuit.js';
import { resolvePolicy } from '../../src/domain/policy.js';
import { withShadowPolicy } from '../../src/domain/shadow.js';
import { outcomeStep } from '../../src/service/breaker-service.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';

// The one mapping of a persisted circuit (src/domain/circuit-record.ts): SQLite's columns and
// Redis' JSON. What Redis reads back is checked against the old schema in
// test/store/stored-circuit.test.ts.

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
  { ...BASE, history: false }, // issue 31: the history opt-out
];

/** Circuits as the domain writes them: fresh, after failures (open, with leases), after successes. */
function domainCircuits(): Circuit[] {
  const out: Circuit[] = [];
  SETTINGS.forEach((settings, i) => {
    let c: Circuit = { ...newCircuit(`c${i}`, settings, 1_000), id: i + 1 };
    out.push(c);
    for (let t = 0; t < 8; t++) {
      c = recordOutcome(c, { success: t % 4 === 3, durationMs: 5 }, 2_000 + t * 9_000).circuit;
      out.push(c);
    }
    for (let t = 0; t < 3; t++) c = recordOutcome(c, { success: false }, 100_000).circuit;
    out.push(admit(c, 200_000, { probeLeaseMs: 5_000 }).circuit); // half-open: a probe lease
  });
  return out;
}

const columnsOf = (c: Circuit) => {
  const row = circuitToColumns(c);
  return RECORD_COLUMNS.map((column) => row[column]!);
};

describe('the circuit record', () => {
  it('names every column of the circuits table, and an update writes all but id, name and created_at', () => {
    const db = openDatabase(':memory:', { exclusive: true });
    migrate(db, readMigrations(defaultMigrationsDir()));
    const table = (db.prepare('PRAGMA table_info(circuits)').all() as { name: string }[]).map((c) => c.name);
    expect([...RECORD_COLUMNS].sort()).toEqual([...table].sort());
    expect(RECORD_COLUMNS.filter((c) => !UPDATED_COLUMNS.includes(c))).toEqual(['id', 'name', 'created_at']);
    db.close();
  });

  it('reads back every circuit the domain writes from its columns, member for member', () => {
    const circuits = domainCircuits();
    expect(circuits.some((c) => c.probeLeases.length > 0)).toBe(true);
    for (const c of circuits) {
      const back = circuitFromColumns(columnsOf(c));
      expect(back).toStrictEqual(c);
    }
  });

  it('writes objects and arrays as JSON text, and a member a circuit lacks as null', () => {
    const { stateChangedAt: _s, throttle: _t, throttleState: _ts, ...old } = domainCircuits()[12]!;
    const row = circuitToColumns(old as Circuit);
    expect(row).toMatchObject({ state_changed_at: null, throttle_policy: null, throttle_state: null });
    expect(row.window_policy).toBe(JSON.stringify(old.window));
    expect(row.probe_leases).toBe('[]');
    expect(circuitFromColumns(columnsOf(old as Circuit))).toMatchObject({ stateChangedAt: null, throttle: null });
  });

  it('leaves a quorum out of a circuit without one (the shape circuits had before issue 17)', () => {
    const [plain, withQuorum] = [domainCircuits()[0]!, domainCircuits()[44]!];
    expect(circuitFromColumns(columnsOf(plain))).not.toHaveProperty('quorum');
    expect(circuitFromColumns(columnsOf(withQuorum)).quorum).toEqual(SETTINGS[4]!.quorum);
  });

  it('stores a circuit in Redis as its own members in JSON', () => {
    const c = domainCircuits()[12]!;
    expect(JSON.parse(circuitToJson(c))).toEqual(JSON.parse(JSON.stringify(c)));
  });

  it('keeps a shadow policy and its state in its column and in the JSON, and refuses a malformed one', () => {
    let c: Circuit = withShadowPolicy(
      { ...newCircuit('c9', BASE, 1_000), id: 9 },
      resolvePolicy({ ...BASE, failureThreshold: 1 }),
      1_000,
    );
    c = outcomeStep({ name: 'c9', settings: c, now: 2_000 }, { success: false })(c).circuit;
    expect(c.shadow?.circuit.state).toBe('open');
    expect(circuitFromColumns(columnsOf(c))).toStrictEqual(c);
    expect(checkStoredCircuit(JSON.parse(circuitToJson(c)))).toEqual(c);
    const bad = JSON.parse(circuitToJson(c));
    bad.shadow.circuit.state = 'ajar';
    expect(checkStoredCircuit(bad)).toEqual(new BadRecord('shadow', expect.any(String)));
    const plain = domainCircuits()[0]!;
    expect(circuitFromColumns(columnsOf(plain))).not.toHaveProperty('shadow');
  });

  it('checks every member of the record read back as JSON: a bad value, null and absence as the field says', () => {
    const good = domainCircuits()[44]!; // every member set, a quorum too
    const copy = (): Record<string, unknown> => JSON.parse(JSON.stringify(good));
    const candidates: unknown[] = ['', 0.5, -1, {}, [], true, 'open'];
    for (const f of RECORD_FIELDS.filter((field) => field.key !== 'id')) {
      const wrong = candidates.find((v) => !f.rule.test(v));
      const raw = copy();
      raw[f.key] = wrong;
      expect(checkStoredCircuit(raw), f.key).toEqual(new BadRecord(f.key, expect.any(String)));
      const nulled = copy();
      nulled[f.key] = null;
      expect(checkStoredCircuit(nulled) instanceof BadRecord, f.key).toBe(f.nullable !== true);
      const absent = copy();
      delete absent[f.key];
      expect(checkStoredCircuit(absent) instanceof BadRecord, f.key).toBe(f.since === undefined);
    }
  });
});
