import type Database from 'better-sqlite3';
import type { CircuitState, Transition } from '../../domain/circuit.js';
import { RECORD_COLUMNS, UPDATED_COLUMNS, type ColumnValue } from '../../domain/circuit-record.js';

/** A circuit's row as values in `RECORD_COLUMNS` order (`.raw()` statements). */
export type CircuitValues = ColumnValue[];

/** Every column of a circuit, for SELECT. */
export const COLUMNS = RECORD_COLUMNS.join(', ');

type EventRow = {
  from_state: CircuitState;
  to_state: CircuitState;
  reason: Transition['reason'];
  at: number;
  detail: string | null;
};

/** The circuits and transitions statements of one connection, prepared once. */
export interface CircuitStatements {
  readonly selectByName: Database.Statement<[string], CircuitValues>;
  readonly insertCircuit: Database.Statement;
  readonly updateCircuit: Database.Statement;
  readonly insertTransition: Database.Statement;
  readonly listOpenAt: Database.Statement<[number, number, number], CircuitValues>;
  readonly listHalfOpenAt: Database.Statement<[number, number, number], CircuitValues>;
  readonly deleteByName: Database.Statement<[string]>;
  readonly selectEvents: Database.Statement<[number, number], EventRow>;
  readonly selectPing: Database.Statement;
  readonly selectDataVersion: Database.Statement<[], number>;
  readonly selectCount: Database.Statement<[], number>;
  readonly countNamesIn: Database.Statement<[string, string, number], number>;
  readonly selectDueOpen: Database.Statement<[number, number, number], string>;
  readonly listAll: Database.Statement<[number, number], CircuitValues>;
  readonly listByState: Database.Statement<[string, number, number], CircuitValues>;
}

const INSERTED = RECORD_COLUMNS.filter((c) => c !== 'id');
const INSERT = `INSERT INTO circuits (${INSERTED.join(', ')}) VALUES (${INSERTED.map((c) => `@${c}`).join(', ')})`;
const UPDATE = `UPDATE circuits SET ${UPDATED_COLUMNS.map((c) => `${c} = @${c}`).join(', ')} WHERE id = @id`;

export function prepareCircuitStatements(db: Database.Database): CircuitStatements {
  return {
    selectByName: db.prepare<[string], CircuitValues>(`SELECT ${COLUMNS} FROM circuits WHERE name = ?`).raw(),
    insertCircuit: db.prepare(INSERT),
    updateCircuit: db.prepare(UPDATE),
    insertTransition: db.prepare(
      'INSERT INTO transitions (circuit_id, from_state, to_state, reason, at, detail) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    // The state a read would show: an open circuit whose time has passed is half-open.
    listOpenAt: db
      .prepare<[number, number, number], CircuitValues>(
        `SELECT ${COLUMNS} FROM circuits WHERE state = 'open' AND open_until > ? AND id > ? ORDER BY id LIMIT ?`,
      )
      .raw(),
    listHalfOpenAt: db
      .prepare<[number, number, number], CircuitValues>(
        `SELECT ${COLUMNS} FROM circuits WHERE (state = 'half_open' OR (state = 'open' AND open_until <= ?))
       AND id > ? ORDER BY id LIMIT ?`,
      )
      .raw(),
    deleteByName: db.prepare<[string]>('DELETE FROM circuits WHERE name = ?'),
    selectEvents: db.prepare<[number, number], EventRow>(
      'SELECT from_state, to_state, reason, at, detail FROM transitions WHERE circuit_id = ? ORDER BY id DESC LIMIT ?',
    ),
    selectPing: db.prepare('SELECT 1').pluck(),
    selectDataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
    selectCount: db.prepare<[], number>('SELECT n FROM circuit_count WHERE id = 1').pluck(),
    // Through the UNIQUE index on name: reads at most `limit` index entries, whatever the table holds.
    countNamesIn: db
      .prepare<[string, string, number], number>(
        'SELECT count(*) FROM (SELECT 1 FROM circuits WHERE name >= ? AND name < ? LIMIT ?)',
      )
      .pluck(),
    // Uses the (state, id) index: only the open circuits are read; and the partial index of
    // the circuits cooling down (issue 29, migration 0009): a cool-down due to end is due too.
    selectDueOpen: db
      .prepare<[number, number, number], string>(
        `SELECT name FROM (
           SELECT name, open_until AS due FROM circuits WHERE state = 'open' AND open_until <= ?
           UNION ALL
           SELECT name, cool_due_at AS due FROM circuits WHERE cool_due_at <= ?
         ) GROUP BY name ORDER BY min(due) LIMIT ?`,
      )
      .pluck(),
    listAll: db
      .prepare<[number, number], CircuitValues>(`SELECT ${COLUMNS} FROM circuits WHERE id > ? ORDER BY id LIMIT ?`)
      .raw(), // the rowid b-tree from the cursor on (keyset): a page deep in the table costs what the first costs
    listByState: db
      .prepare<[string, number, number], CircuitValues>(
        `SELECT ${COLUMNS} FROM circuits WHERE state = ? AND id > ? ORDER BY id LIMIT ?`,
      )
      .raw(),
  };
}
