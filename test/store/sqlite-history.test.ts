import { describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit, type Outcome } from '../../src/domain/circuit.js';
import { decodeEntry, type HistoryHook } from '../../src/domain/history.js';
import { HISTORY_DEFAULTS, type HistorySettings } from '../../src/domain/history-settings.js';
import type { BatchItem } from '../../src/store/circuit-store.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { TRIM_EVERY } from '../../src/store/sqlite/circuit-store.js';
import { SqliteHousekeeping } from '../../src/store/sqlite/housekeeping.js';
import { Housekeeping } from '../../src/service/housekeeping.js';
import { silentLogger } from '../helper.js';
import { outcomeHistory, outcomeStep } from '../../src/service/breaker-service.js';

// The SQLite side of issue 31's history (migration 0012, src/store/sqlite/history-table.ts).

const SETTINGS = { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const HOUR_MS = 3_600_000;

function open(history: Partial<HistorySettings> = {}) {
  const db = openDatabase(':memory:', { exclusive: true });
  migrate(db, readMigrations(defaultMigrationsDir()));
  const store = new SqliteCircuitStore(db, true, { ...HISTORY_DEFAULTS, ...history });
  const rows = (name = 'c') =>
    db
      .prepare<[string], { seq: number; t: number; e: string }>(
        'SELECT seq, t, e FROM history WHERE circuit_id = (SELECT id FROM circuits WHERE name = ?) ORDER BY seq',
      )
      .all(name);
  const count = () => db.prepare<[], number>('SELECT count(*) FROM history').pluck().get()!;
  return { db, store, rows, count };
}

/** The service's batch item for one outcome at `now` (its step and its history hook). */
function outcomeItem(name: string, outcome: Outcome, now: number): BatchItem {
  return {
    name,
    step: outcomeStep({ name, settings: { ...SETTINGS, successThreshold: 1 } as never, now }, outcome),
    history: outcomeHistory(now, outcome),
  };
}

/** Write `n` successes to circuit `name`, `perBatch` per transaction, one ms apart from `start`. */
function successes(store: SqliteCircuitStore, name: string, n: number, start = T0, perBatch = 4_096): void {
  for (let i = 0; i < n; i += perBatch) {
    const items: BatchItem[] = [];
    for (let j = i; j < Math.min(n, i + perBatch); j++) items.push(outcomeItem(name, { success: true }, start + j));
    store.applyBatch(items);
  }
}

describe('the SQLite history table (issue 31)', () => {
  it('writes an outcome that leaves the circuit as it was: only its history row (apply and applyBatch)', () => {
    const { store, rows, db } = open();
    store.applyBatch([outcomeItem('c', { success: true }, T0)]); // creates c
    const updatedAt = () => db.prepare('SELECT updated_at FROM circuits').pluck().get();
    const stamp = updatedAt();
    const outcome = { success: true, durationMs: 7 };
    const now = T0 + 5;
    expect(
      store.apply(
        'c',
        outcomeStep({ name: 'c', settings: SETTINGS as never, now }, outcome),
        outcomeHistory(now, outcome),
      )?.circuit.failureCount,
    ).toBe(0);
    store.applyBatch([outcomeItem('c', { success: true }, T0 + 6)]);
    expect(rows().map((r) => [r.seq, r.t, r.e])).toEqual([
      [1, T0, '[1]'],
      [2, T0 + 5, '[1,7]'],
      [3, T0 + 6, '[1]'],
    ]);
    expect(updatedAt()).toBe(stamp); // the circuit's row was not rewritten
  });

  it('writes the hook entry, then one transition entry per transition stamped with its t', () => {
    const { store, rows } = open();
    const items = Array.from({ length: 5 }, (_, i) => outcomeItem('c', { success: false }, T0 + i));
    store.applyBatch(items);
    const decoded = rows().map((r) => decodeEntry(r.t, r.e));
    expect(decoded.map((e) => e!.type)).toEqual(['outcome', 'outcome', 'outcome', 'outcome', 'outcome', 'transition']);
    expect(decoded[5]).toMatchObject({ t: T0 + 4, transition: { from: 'closed', to: 'open', at: T0 + 4 } });
  });

  it('writes a hook-less write’s transitions at their own time, and nothing else of it', () => {
    const { store, rows } = open();
    store.applyBatch(Array.from({ length: 5 }, (_, i) => outcomeItem('c', { success: false }, T0 + i)));
    const openUntil = T0 + 4 + 30_000;
    // The lazy refresh (a GET, the due job): no hook.
    store.apply('c', (c) => (c === null ? null : recordOutcome(c, { success: true }, openUntil + 5_000)));
    const last = rows()
      .map((r) => decodeEntry(r.t, r.e)!)
      .slice(6);
    expect(last.map((e) => e.type)).toEqual(['transition', 'transition']);
    expect(last[0]).toMatchObject({ t: openUntil, transition: { to: 'half_open', at: openUntil } });
  });

  it('writes the history in the circuit’s transaction: a batch that fails leaves neither', () => {
    const { store, count, db } = open();
    const boom: BatchItem = {
      name: 'd',
      step: () => {
        throw new Error('boom');
      },
    };
    expect(() => store.applyBatch([outcomeItem('c', { success: false }, T0), boom])).toThrow('boom');
    expect(count()).toBe(0);
    expect(db.prepare('SELECT count(*) FROM circuits').pluck().get()).toBe(0);
  });

  it('writes nothing for a hook answering null, nor for a circuit whose policy says history: false', () => {
    const { store, count } = open();
    const none: HistoryHook = () => null;
    store.apply('c', (c) => ({ circuit: c ?? newCircuit('c', SETTINGS, T0), transitions: [] }), none);
    const off: Circuit = { ...newCircuit('off', SETTINGS, T0), history: false };
    store.apply('off', (c) => ({ circuit: c ?? off, transitions: [] }), outcomeHistory(T0, { success: true }));
    store.applyBatch(Array.from({ length: 6 }, (_, i) => outcomeItem('off', { success: false }, T0 + i)));
    expect(store.find('off')).toMatchObject({ state: 'open', history: false });
    expect(count()).toBe(0);
  });

  it('reads a circuit’s entries in write order, bounded by from, to and limit; null for an unknown circuit', () => {
    const { store } = open();
    successes(store, 'c', 10);
    expect(store.history('c', { limit: 100 })!.map((e) => e.t)).toEqual(Array.from({ length: 10 }, (_, i) => T0 + i));
    expect(store.history('c', { from: T0 + 3, to: T0 + 7, limit: 100 })!.map((e) => e.t)).toEqual([
      T0 + 3,
      T0 + 4,
      T0 + 5,
      T0 + 6,
    ]);
    expect(store.history('c', { from: T0 + 3, limit: 2 })!.map((e) => e.text)).toEqual(['[1]', '[1]']);
    expect(store.history('nope', { limit: 10 })).toBeNull();
  });

  it('deletes a circuit’s history with it, and with an idle deletion', () => {
    const { store, db, count } = open();
    successes(store, 'c', 20);
    successes(store, 'idle', 20, T0 - 30 * 24 * HOUR_MS);
    expect(store.delete('c')).toBe(true);
    expect(count()).toBe(20);
    const housekeeping = new SqliteHousekeeping(db, (name) => store.forget(name));
    const { deleted } = housekeeping.deleteIdle(T0 - 24 * HOUR_MS, T0, () => false, 0, 10);
    expect(deleted).toEqual(['idle']);
    expect(count()).toBe(0);
  });

  it('keeps at most max_outcomes entries (plus less than one trim interval), dropping the oldest first', () => {
    const max = 3_000;
    const { store, rows } = open({ maxOutcomes: max });
    successes(store, 'c', 10_000, T0, 700);
    const kept = rows();
    expect(kept.length).toBeGreaterThanOrEqual(max);
    expect(kept.length).toBeLessThan(max + TRIM_EVERY);
    expect(kept.at(-1)!.seq).toBe(10_000);
    expect(kept[0]!.seq).toBe(10_000 - kept.length + 1); // no gap: the oldest went first
  });

  it('drops entries older than max_age_hours at the circuit’s next trim', () => {
    const { store, rows } = open({ maxAgeHours: 1 });
    successes(store, 'c', 1_000, T0);
    successes(store, 'c', 1_000, T0 + 2 * HOUR_MS);
    const kept = rows();
    expect(kept.every((r) => r.t >= T0 + 2 * HOUR_MS - HOUR_MS)).toBe(true);
    expect(kept.length).toBe(1_000);
  });

  it('drops a quiet circuit’s entries past max_age_hours in the housekeeping pass, in batches', async () => {
    const { store, db, rows } = open({ maxAgeHours: 1 });
    successes(store, 'quiet', 500, T0); // never trimmed by the write path: under 1,024 entries
    successes(store, 'c', 10, T0 + 2 * HOUR_MS);
    const housekeeping = new SqliteHousekeeping(db, (name) => store.forget(name));
    const before = T0 + 3 * HOUR_MS - HOUR_MS;
    expect(housekeeping.trimHistory(before, 0, 200)).toEqual({ deleted: 200, cursor: 0, done: false });
    expect(rows('quiet')).toHaveLength(300);
    const job = new Housekeeping(housekeeping, () => T0 + 3 * HOUR_MS, silentLogger, {
      maxAgeDays: 0,
      maxPerCircuit: 0,
      idleCircuitDays: null,
      isDeclared: () => false,
      historyMaxAgeHours: 1,
      yieldBetween: async () => {},
    });
    expect((await job.sweep()).historyTrimmed).toBe(300);
    expect(rows('quiet')).toEqual([]);
    expect(rows('c')).toHaveLength(10); // young
    successes(store, 'quiet', 5, T0 - HOUR_MS);
    expect((await job.sweep()).historyTrimmed).toBe(0); // at most one pass an hour
  });

  it('keeps 200,000 of 300,000 outcomes with the default bound (and its slack)', () => {
    const { store, db } = open();
    successes(store, 'c', 300_000);
    const [n, first, last] = db.prepare('SELECT count(*), min(seq), max(seq) FROM history').raw().get() as number[];
    expect(n).toBeGreaterThanOrEqual(HISTORY_DEFAULTS.maxOutcomes);
    expect(n).toBeLessThan(HISTORY_DEFAULTS.maxOutcomes + TRIM_EVERY);
    expect([first, last]).toEqual([300_000 - n! + 1, 300_000]);
  });
});
