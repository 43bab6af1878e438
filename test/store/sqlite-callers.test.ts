// Issue 27 item 9: the SQLite store keeps a circuit's caller table as one row per caller
// (migration 0008) and writes only the rows a step changed, added or dropped. Triggers on
// caller_entries count the rows each write touched (https://www.sqlite.org/lang_createtrigger.html).
import type Database from 'better-sqlite3';
import { describe, expect, it, vi } from 'vitest';
import { newCircuit, recordOutcome, type Circuit } from '../../src/domain/circuit.js';
import { callerEntries, type CallerEntry } from '../../src/domain/caller-state.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { CallerRows, SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { CircuitSnapshot } from '../../src/store/sqlite/circuit-snapshot.js';
import { planCallerWrites } from '../../src/store/caller-writes.js';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const quorum = { minCallers: 2, windowSeconds: 3_600, maxCallers: 1_000 };
const settings = { failureThreshold: 1_000_000, timeoutSeconds: 30, halfOpenMaxCalls: 1, quorum };
const caller = (i: number) => String(i).padStart(128, 'c');

function storeWithCounter() {
  const db = openDatabase(':memory:', { exclusive: true });
  migrate(db, readMigrations(defaultMigrationsDir()));
  db.exec(`CREATE TABLE entry_writes (n INTEGER NOT NULL);
    INSERT INTO entry_writes VALUES (0);
    CREATE TRIGGER count_entry_inserts AFTER INSERT ON caller_entries BEGIN UPDATE entry_writes SET n = n + 1; END;
    CREATE TRIGGER count_entry_updates AFTER UPDATE ON caller_entries BEGIN UPDATE entry_writes SET n = n + 1; END;
    CREATE TRIGGER count_entry_deletes AFTER DELETE ON caller_entries BEGIN UPDATE entry_writes SET n = n + 1; END;`);
  const writes = () => db.prepare('SELECT n FROM entry_writes').pluck().get() as number;
  return { db, store: new SqliteCircuitStore(db, true), writes };
}

const rowCount = (db: Database.Database) => db.prepare('SELECT count(*) FROM caller_entries').pluck().get() as number;

/** The table as a fresh connection's store reads it (no cache). */
const reread = (db: Database.Database) => callerEntries(new SqliteCircuitStore(db, true).find('wide')!);

const outcome =
  (success: boolean, who?: string, at = T0) =>
  (c: Circuit | null) =>
    recordOutcome(c ?? newCircuit('wide', settings, T0), { success, late: 'count_only', caller: who }, at);

describe('SQLite caller table writes', () => {
  it('writes one entry row for one caller changed, not the table (apply and applyBatch)', () => {
    const { db, store, writes } = storeWithCounter();
    store.applyBatch(Array.from({ length: 100 }, (_, i) => ({ name: 'wide', step: outcome(false, caller(i)) })));
    expect(callerEntries(store.find('wide')!).length).toBe(100);
    expect(writes()).toBe(100); // one insert per new caller
    const before = writes();
    // Anonymous failures change the circuit's count, never its caller table.
    store.apply('wide', outcome(false));
    store.applyBatch(Array.from({ length: 10 }, () => ({ name: 'wide', step: outcome(false) })));
    expect(store.find('wide')!.failureCount).toBe(111);
    expect(writes()).toBe(before);
    // A known caller seen again (moves to the most recent end) and a new one: one row each.
    store.apply('wide', outcome(false, caller(7)));
    expect(writes()).toBe(before + 1);
    store.applyBatch([{ name: 'wide', step: outcome(false, caller(8)) }]);
    expect(writes()).toBe(before + 2);
    store.apply('wide', outcome(false, caller(100)));
    expect(writes()).toBe(before + 3);
    expect(rowCount(db)).toBe(101);
    // The order is kept in the rows: a fresh read sees what the store's cache holds.
    const expected = [...Array.from({ length: 100 }, (_, i) => i).filter((i) => i !== 7 && i !== 8), 7, 8, 100];
    expect(reread(db).map((e) => e[0])).toEqual(expected.map(caller));
    expect(reread(db)).toEqual(callerEntries(store.find('wide')!));
    expect(reread(db).find((e) => e[0] === caller(7))![1]).toBe(2);
  });

  it('drops the least recently seen rows at max_callers and all of them with the circuit', () => {
    const { db, store } = storeWithCounter();
    const small = { ...settings, quorum: { ...quorum, maxCallers: 3 } };
    const step = (who: string) => (c: Circuit | null) =>
      recordOutcome(c ?? newCircuit('wide', small, T0), { success: false, late: 'count_only', caller: who }, T0);
    for (const who of ['a', 'b', 'c', 'd', 'b', 'e']) store.apply('wide', step(who));
    expect(reread(db).map((e) => e[0])).toEqual(['d', 'b', 'e']);
    expect(rowCount(db)).toBe(3);
    expect(store.delete('wide')).toBe(true);
    expect(rowCount(db)).toBe(0); // ON DELETE CASCADE
  });

  it('counts isolated callers for /metrics from the rows', () => {
    const { db, store } = storeWithCounter();
    const strict = { ...settings, failureThreshold: 2 };
    const step = (who: string) => (c: Circuit | null) =>
      recordOutcome(c ?? newCircuit('wide', strict, T0), { success: false, late: 'count_only', caller: who }, T0);
    for (const who of ['a', 'a', 'b', 'c', 'c']) store.apply('wide', step(who));
    const [gauge] = new CircuitSnapshot(db).first(10, T0);
    expect(gauge!.isolatedCallers).toBe(2);
  });
});

describe('SQLite writes on a connection that holds the file alone', () => {
  it('read no caller rows under the lock (the cache is the truth), and a rolled-back batch reads them again', () => {
    const { db, store } = storeWithCounter();
    store.applyBatch(Array.from({ length: 100 }, (_, i) => ({ name: 'wide', step: outcome(false, caller(i)) })));
    const attach = vi.spyOn(CallerRows.prototype, 'attach');
    try {
      store.apply('wide', outcome(false, caller(3)));
      store.applyBatch([{ name: 'wide', step: outcome(false, caller(4)) }]);
      expect(attach).not.toHaveBeenCalled();
      expect(reread(db)).toEqual(callerEntries(store.find('wide')!));
      const failing = () => {
        throw new Error('step failed');
      };
      expect(() =>
        store.applyBatch([
          { name: 'wide', step: outcome(false, caller(5)) },
          { name: 'wide', step: failing },
        ]),
      ).toThrow('step failed');
      attach.mockClear();
      expect(callerEntries(store.find('wide')!).at(-1)![0]).toBe(caller(4)); // nothing of the batch
      expect(attach).toHaveBeenCalledTimes(1); // read again, not the batch's copy
    } finally {
      attach.mockRestore();
    }
  });
});

describe('caller voters (issue 30, migration 0011)', () => {
  it("stores each entry's voter, appended and changed in place; an entry without one reads back with 7 members", () => {
    const { db, store } = storeWithCounter();
    const voted =
      (success: boolean, who: string, voter?: string, at = T0) =>
      (c: Circuit | null) =>
        recordOutcome(c ?? newCircuit('wide', settings, T0), { success, late: 'count_only', caller: who, voter }, at);
    store.applyBatch([
      { name: 'wide', step: voted(false, 'm/1', 'm') },
      { name: 'wide', step: voted(false, 'm/2', 'm') },
      { name: 'wide', step: voted(false, 'plain') },
    ]);
    expect(reread(db).map((e) => e[7])).toEqual(['m', 'm', undefined]);
    expect(reread(db).find((e) => e[0] === 'plain')).toHaveLength(7);
    // Another credential reports for m/2 (seen again: moves to the end): its voter is the last reporter.
    store.apply('wide', voted(false, 'm/2', 'n', T0 + 1));
    expect(reread(db).map((e) => [e[0], e[7]])).toEqual([
      ['m/1', 'm'],
      ['plain', undefined],
      ['m/2', 'n'],
    ]);
    expect(reread(db)).toEqual(callerEntries(store.find('wide')!));
    expect(db.prepare("SELECT voter FROM caller_entries WHERE caller = 'plain'").pluck().get()).toBeNull();
  });
});

describe('migration 0008', () => {
  it("moves every row's callers JSON into caller_entries, in order, and drops the column", () => {
    const db = openDatabase(':memory:', { exclusive: true });
    const all = readMigrations(defaultMigrationsDir());
    migrate(
      db,
      all.filter((m) => m.version < 8),
    );
    const entries = (n: number, tag: string): CallerEntry[] =>
      Array.from({ length: n }, (_, i) => [`${tag}${n - i}`, i, T0 + i, null, i % 2 ? T0 + 60_000 : null, 30, null]);
    const insert = db.prepare(
      `INSERT INTO circuits (name, state, failure_count, failure_threshold, timeout_seconds, half_open_max_calls,
        probe_leases, created_at, updated_at, quorum_policy, callers) VALUES (?, 'closed', 0, 5, 30, 1, '[]', ?, ?, ?, ?)`,
    );
    const q = JSON.stringify(quorum);
    insert.run('many', T0, T0, q, JSON.stringify(entries(1_000, 'm')));
    insert.run('few', T0, T0, q, JSON.stringify(entries(3, 'f')));
    insert.run('none', T0, T0, q, null);
    insert.run('plain', T0, T0, null, null);
    // Later migrations (0009, issue 29) run after it: the store reads every column.
    expect(migrate(db, all)[0]).toBe('0008_caller_entries.sql');
    const columns = db.prepare("SELECT name FROM pragma_table_info('circuits')").pluck().all();
    expect(columns).not.toContain('callers');
    expect(columns).toContain('quorum_policy');
    expect(rowCount(db)).toBe(1_003);
    const store = new SqliteCircuitStore(db, true);
    expect(store.find('many')!.callers).toEqual(entries(1_000, 'm'));
    expect(store.find('few')!.callers).toEqual(entries(3, 'f'));
    expect(store.find('none')).not.toHaveProperty('callers');
    expect(store.find('plain')).not.toHaveProperty('callers');
    expect(store.list({ limit: 10 }).map((c) => c.callers?.length ?? 0)).toEqual([1_000, 3, 0, 0]);
  });
});

describe('planCallerWrites', () => {
  const e = (who: string, failures = 1): CallerEntry => [who, failures, T0, null, null, 0, null];
  const [a, b, c, d] = [e('a'), e('b'), e('c'), e('d')];

  it('keeps entries the step left as they were, by reference, and their places', () => {
    expect(planCallerWrites([a, b, c], [a, b, c])).toEqual({ deleted: [], changed: [], appended: [] });
  });

  it('moves a caller seen again to the end: one row', () => {
    const b2 = e('b', 2);
    expect(planCallerWrites([a, b, c], [a, c, b2])).toEqual({ deleted: [], changed: [], appended: [b2] });
  });

  it('changes an entry in place (a probe taken) without moving the others', () => {
    const b2: CallerEntry = ['b', 1, T0, null, T0, 30, T0 + 1];
    expect(planCallerWrites([a, b, c], [a, b2, c])).toEqual({ deleted: [], changed: [b2], appended: [] });
  });

  it('deletes the callers gone (idle, or past max_callers) and appends new ones', () => {
    expect(planCallerWrites([a, b, c], [c, d])).toEqual({ deleted: ['a', 'b'], changed: [], appended: [d] });
    expect(planCallerWrites([a, b], [])).toEqual({ deleted: ['a', 'b'], changed: [], appended: [] });
    expect(planCallerWrites([], [a, b])).toEqual({ deleted: [], changed: [], appended: [a, b] });
  });

  it('renumbers from the first entry out of order (not a step the domain makes, kept right anyway)', () => {
    expect(planCallerWrites([a, b, c, d], [a, c, b, d])).toEqual({ deleted: [], changed: [], appended: [b, d] });
  });
});
