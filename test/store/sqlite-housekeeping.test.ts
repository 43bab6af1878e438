import { describe, expect, it } from 'vitest';
import {
  DELETE_OLD_RANGE_SQL,
  OLDEST_BATCH_BOUND_SQL,
  SqliteHousekeeping,
} from '../../src/store/sqlite/housekeeping.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';

/** A migrated in-memory database with one circuit and transitions at the given times, in id order. */
function withTransitions(ats: readonly number[]) {
  const db = openDatabase(':memory:', { exclusive: true });
  migrate(db, readMigrations(defaultMigrationsDir()));
  db.prepare(
    "INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES ('c', 5, 30, 0, 0)",
  ).run();
  const insert = db.prepare(
    "INSERT INTO transitions (circuit_id, from_state, to_state, reason, at) VALUES (1, 'closed', 'open', 'failure_threshold_reached', ?)",
  );
  for (const at of ats) insert.run(at);
  const left = () => db.prepare<[], number>('SELECT at FROM transitions ORDER BY id').pluck().all();
  return { db, housekeeping: new SqliteHousekeeping(db, () => {}), left };
}

describe('SqliteHousekeeping.trimByAge: the oldest rows by id range', () => {
  it('deletes the old rows among the oldest `batch`, a batch at a time, and keeps a young one in the range', () => {
    const { housekeeping, left } = withTransitions([1, 2, 3, 50, 4, 60]);
    expect(housekeeping.trimByAge(10, 2)).toBe(2); // ids 1, 2
    expect(left()).toEqual([3, 50, 4, 60]);
    expect(housekeeping.trimByAge(10, 3)).toBe(2); // ids 3 and 5; id 4 (young) stays: a short batch ends the phase
    expect(left()).toEqual([50, 60]);
    expect(housekeeping.trimByAge(10, 3)).toBe(0);
  });

  it('takes a batch larger than the table as the whole table, and an empty table as nothing to do', () => {
    const { housekeeping, left } = withTransitions([1, 2, 3]);
    expect(housekeeping.trimByAge(10, 1_000)).toBe(3);
    expect(left()).toEqual([]);
    expect(housekeeping.trimByAge(10, 1_000)).toBe(0);
  });

  it('deletes a range of the primary key, its bound found by walking the oldest rowids (LIMIT 1 OFFSET batch - 1)', () => {
    const { db } = withTransitions([1]);
    const plan = (sql: string, ...args: number[]) =>
      db
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...args)
        .map((r) => (r as { detail: string }).detail);
    expect(plan(DELETE_OLD_RANGE_SQL, 1, 1)).toEqual(['SEARCH transitions USING INTEGER PRIMARY KEY (rowid<?)']);
    // In rowid order from the oldest (no sort, no index), stopping after `batch` rows.
    expect(plan(OLDEST_BATCH_BOUND_SQL, 1)).toEqual(['SCAN transitions']);
  });
});
