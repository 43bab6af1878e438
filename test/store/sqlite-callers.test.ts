// Issue 27 item 9: the SQLite store rewrites a circuit's caller table only when a write changed
// it. A trigger on `UPDATE OF callers` (it fires whenever the column is in the SET list,
// https://www.sqlite.org/lang_createtrigger.html) counts the writes that carried the table.
import { describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit } from '../../src/domain/circuit.js';
import { callerEntries } from '../../src/domain/caller-state.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';

const T0 = Date.parse('2026-12-01T00:00:00.000Z');
const quorum = { minCallers: 2, windowSeconds: 3_600, maxCallers: 1_000 };
const settings = { failureThreshold: 1_000_000, timeoutSeconds: 30, halfOpenMaxCalls: 1, quorum };
const caller = (i: number) => String(i).padStart(128, 'c');

function storeWithCounter() {
  const db = openDatabase(':memory:', { exclusive: true });
  migrate(db, readMigrations(defaultMigrationsDir()));
  db.exec(`CREATE TABLE caller_writes (n INTEGER NOT NULL);
    INSERT INTO caller_writes VALUES (0);
    CREATE TRIGGER count_caller_writes AFTER UPDATE OF callers ON circuits
      BEGIN UPDATE caller_writes SET n = n + 1; END;`);
  const writes = () => db.prepare('SELECT n FROM caller_writes').pluck().get() as number;
  return { store: new SqliteCircuitStore(db, true), writes };
}

const outcome = (success: boolean, who?: string) => (c: Circuit | null) =>
  recordOutcome(c ?? newCircuit('wide', settings, T0), { success, late: 'count_only', caller: who }, T0);

describe('SQLite caller table writes', () => {
  it('rewrites the caller table only for writes that change it (apply and applyBatch)', () => {
    const { store, writes } = storeWithCounter();
    store.applyBatch(Array.from({ length: 100 }, (_, i) => ({ name: 'wide', step: outcome(false, caller(i)) })));
    expect(callerEntries(store.find('wide')!).length).toBe(100);
    const before = writes();
    // Anonymous failures change the circuit's count, never its caller table.
    store.apply('wide', outcome(false));
    store.applyBatch(Array.from({ length: 10 }, () => ({ name: 'wide', step: outcome(false) })));
    expect(store.find('wide')!.failureCount).toBe(111);
    expect(writes()).toBe(before);
    // A named failure changes it: written, once per write.
    store.apply('wide', outcome(false, caller(7)));
    store.applyBatch([{ name: 'wide', step: outcome(false, caller(8)) }]);
    expect(writes()).toBe(before + 2);
    expect(callerEntries(store.find('wide')!).at(-1)![0]).toBe(caller(8));
  });
});
