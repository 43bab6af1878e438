import type Database from 'better-sqlite3';
import { isIdleCircuit } from '../../domain/idle.js';
import { CallerRows } from './circuit-store.js';
import { circuitFromColumns } from '../../domain/circuit-record.js';
import { COLUMNS, type CircuitValues } from './circuit-statements.js';
import type { HousekeepingStore, IdleProgress, TrimProgress } from '../housekeeping-store.js';

/** Circuits one idle-pass call reads (a plain rowid range: well under a millisecond). */
const IDLE_SCAN = 1_000;
/** Circuits one history age-pass call looks at (one DELETE each, on its primary-key range). */
const HISTORY_SCAN = 100;

/** The age trim's statements (their plans are tested): the bound of the oldest `batch` ids, then the ranged DELETE. */
export const OLDEST_BATCH_BOUND_SQL = 'SELECT id FROM transitions ORDER BY id LIMIT 1 OFFSET ?';
export const DELETE_OLD_RANGE_SQL = 'DELETE FROM transitions WHERE id <= ? AND at < ?';

interface IdleRow {
  id: number;
  name: string;
  state: string;
  forced_state: string | null;
  updated_at: number;
}

/**
 * Housekeeping on SQLite. Every statement looks at a bounded window of rows found through
 * an index (the rowid, `transitions_circuit`), never a scan that grows with the table.
 * The age trim relies on transition ids growing with time, which holds for one clock and
 * within clock skew across processes: a row younger than the cut-off stops it.
 */
export class SqliteHousekeeping implements HousekeepingStore {
  private readonly nthOldestId;
  private readonly newestId;
  private readonly deleteOldRange;
  private readonly circuitsAfter;
  private readonly cutoffId;
  private readonly deleteBelow;
  private readonly idleWindow;
  private readonly circuitById;
  private readonly deleteIfIdle;
  private readonly callerRows;
  private readonly circuitIdsAfter;
  private readonly deleteOldHistory;

  constructor(
    db: Database.Database,
    /** Tells the store's cache that a circuit is gone (it cannot see our statements otherwise). */
    private readonly forget: (name: string) => void,
  ) {
    // The oldest `batch` rows are one range of the rowid b-tree: its upper bound, then one ranged DELETE.
    this.nthOldestId = db.prepare<[number], number>(OLDEST_BATCH_BOUND_SQL).pluck();
    this.newestId = db.prepare<[], number | null>('SELECT max(id) FROM transitions').pluck();
    this.deleteOldRange = db.prepare<[number, number]>(DELETE_OLD_RANGE_SQL);
    this.circuitsAfter = db.prepare<[number, number], { circuit_id: number; id: number }>(
      'SELECT circuit_id, id FROM transitions WHERE id > ? ORDER BY id LIMIT ?',
    );
    // The id of the circuit's `max`-th newest transition: everything below it goes.
    this.cutoffId = db
      .prepare<[number, number], number>(
        'SELECT id FROM transitions WHERE circuit_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?',
      )
      .pluck();
    this.deleteBelow = db.prepare<[number, number, number]>(
      'DELETE FROM transitions WHERE id IN (SELECT id FROM transitions WHERE circuit_id = ? AND id < ? ORDER BY id LIMIT ?)',
    );
    this.idleWindow = db.prepare<[number, number], IdleRow>(
      'SELECT id, name, state, forced_state, updated_at FROM circuits WHERE id > ? ORDER BY id LIMIT ?',
    );
    this.circuitById = db.prepare<[number], CircuitValues>(`SELECT ${COLUMNS} FROM circuits WHERE id = ?`).raw();
    this.callerRows = new CallerRows(db);
    this.circuitIdsAfter = db
      .prepare<[number, number], number>('SELECT id FROM circuits WHERE id > ? ORDER BY id LIMIT ?')
      .pluck();
    // Among the circuit's oldest `limit` entries (a range of the primary key), those past the age.
    this.deleteOldHistory = db.prepare<{ id: number; before: number; limit: number }>(
      `DELETE FROM history WHERE circuit_id = @id AND seq IN (
         SELECT seq FROM history WHERE circuit_id = @id ORDER BY seq LIMIT @limit
       ) AND t < @before`,
    );
    this.deleteIfIdle = db.prepare<[number, number]>(
      "DELETE FROM circuits WHERE id = ? AND state = 'closed' AND forced_state IS NULL AND updated_at < ?",
    );
  }

  /**
   * Deletes the old rows among the oldest `batch` (`id <= ` the batch-th id: a range of the
   * primary key, read and deleted in id order, so the table's pages go one after another).
   */
  trimByAge(before: number, batch: number): number {
    const bound = this.nthOldestId.get(batch - 1) ?? this.newestId.get();
    if (bound == null) return 0;
    return this.deleteOldRange.run(bound, before).changes;
  }

  /**
   * Looks at the `batch` transitions after `cursor` (only circuits with new transitions can be
   * over the bound) and deletes at most `batch` rows in all; when that budget runs out the
   * cursor stays, so the next call goes on with the same window.
   */
  trimPerCircuit(max: number, _before: number, cursor: number, batch: number): TrimProgress {
    const rows = this.circuitsAfter.all(cursor, batch);
    if (rows.length === 0) return { deleted: 0, cursor, done: true };
    let deleted = 0;
    for (const circuitId of new Set(rows.map((r) => r.circuit_id))) {
      const cutoff = this.cutoffId.get(circuitId, max - 1);
      if (cutoff === undefined) continue;
      deleted += this.deleteBelow.run(circuitId, cutoff, batch - deleted).changes;
      if (deleted >= batch) return { deleted, cursor, done: false };
    }
    return { deleted, cursor: rows.at(-1)!.id, done: rows.length < batch };
  }

  /**
   * The history's age bound (issue 31), for circuits the write path no longer trims: up to
   * HISTORY_SCAN circuits after `cursor`, each one DELETE among its oldest entries. A circuit
   * with more old entries than the budget left keeps the cursor before it, so the next call
   * goes on with it.
   */
  trimHistory(before: number, cursor: number, batch: number): TrimProgress {
    const ids = this.circuitIdsAfter.all(cursor, HISTORY_SCAN);
    let deleted = 0;
    for (const id of ids) {
      const limit = batch - deleted;
      const n = this.deleteOldHistory.run({ id, before, limit }).changes;
      deleted += n;
      if (n === limit) return { deleted, cursor: id - 1, done: false };
    }
    return { deleted, cursor: ids.at(-1) ?? cursor, done: ids.length < HISTORY_SCAN };
  }

  /**
   * Looks at up to IDLE_SCAN circuits after `cursor` and deletes at most `batch` of them (each
   * deletion also deletes the circuit's transitions: ON DELETE CASCADE, up to max_per_circuit rows).
   * A candidate by its columns is read whole, its caller table too, and judged by the domain's
   * rule (domain/idle.ts).
   */
  deleteIdle(
    before: number,
    now: number,
    keep: (name: string) => boolean,
    cursor: number,
    batch: number,
  ): IdleProgress {
    const rows = this.idleWindow.all(cursor, IDLE_SCAN);
    const deleted: string[] = [];
    for (const row of rows) {
      if (row.state !== 'closed' || row.forced_state !== null || row.updated_at >= before || keep(row.name)) continue;
      const whole = this.circuitById.get(row.id);
      if (whole === undefined || !isIdleCircuit(this.callerRows.attach(circuitFromColumns(whole)), before, now))
        continue;
      // Re-checked by the DELETE itself: any write since the SELECT sets updated_at to now and keeps the circuit.
      if (this.deleteIfIdle.run(row.id, before).changes === 1) {
        this.forget(row.name);
        deleted.push(row.name);
        if (deleted.length >= batch) return { deleted, cursor: row.id, done: false };
      }
    }
    return { deleted, cursor: rows.at(-1)?.id ?? cursor, done: rows.length < IDLE_SCAN };
  }
}
