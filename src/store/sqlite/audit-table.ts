import type Database from 'better-sqlite3';
import {
  auditValueText,
  type AuditEntry,
  type AuditEntryInput,
  type AuditPage,
  type AuditQuery,
} from '../../domain/audit-entry.js';
import { AppError } from '../../domain/errors.js';
import type { AuditStore } from '../audit-store.js';

interface Row {
  id: number;
  at: number;
  who: string;
  action: string;
  circuit: string | null;
  before: string | null;
  after: string | null;
  request_id: string | null;
  remote: string | null;
}

const toEntry = (r: Row): AuditEntry => ({
  id: String(r.id),
  at: r.at,
  who: r.who,
  action: r.action,
  circuit: r.circuit,
  before: r.before,
  after: r.after,
  requestId: r.request_id,
  remote: r.remote,
});

/** The filters a page may have, in the order their SQL is written. */
const FILTERS = ['circuit', 'who', 'action', 'since', 'until', 'before'] as const;
const CONDITION: Record<(typeof FILTERS)[number], string> = {
  circuit: 'circuit = ?',
  who: 'who = ?',
  action: 'action = ?',
  since: 'at >= ?',
  until: 'at < ?',
  before: 'id < ?',
};

/**
 * The `audit` table (migrations/0010_audit.sql). An entry is inserted on its own, in the
 * same connection as the change it records and right after it commits (WAL, so it is in the
 * database file's log once `append` returns: a `kill -9` after that loses nothing). Pages are
 * newest first by id; one prepared statement per set of filters present (at most 64), so each
 * page is one index range.
 */
export class SqliteAuditTable implements AuditStore {
  readonly cursorPattern = /^\d{1,15}$/;
  private readonly insert;
  private readonly insertOnce;
  private readonly oldestBound;
  private readonly newestId;
  private readonly deleteRange;
  private readonly pages = new Map<string, Database.Statement<unknown[], Row>>();

  constructor(private readonly db: Database.Database) {
    this.insert = db.prepare<unknown[], Row>(
      `INSERT INTO audit (at, who, action, circuit, before, after, request_id, remote)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *`,
    );
    // One statement: SQLite's write lock makes the check and the insert atomic across processes.
    this.insertOnce = db.prepare<unknown[], Row>(
      `INSERT INTO audit (at, who, action, circuit, before, after, request_id, remote)
       SELECT ?, ?, ?, ?, ?, ?, ?, ?
       WHERE NOT EXISTS (SELECT 1 FROM audit WHERE action = ? AND after IS ? AND at >= ?) RETURNING *`,
    );
    this.oldestBound = db.prepare<[number], number>('SELECT id FROM audit ORDER BY id LIMIT 1 OFFSET ?').pluck();
    this.newestId = db.prepare<[], number | null>('SELECT max(id) FROM audit').pluck();
    this.deleteRange = db.prepare<[number, number]>('DELETE FROM audit WHERE id <= ? AND at < ?');
  }

  append(e: AuditEntryInput): AuditEntry {
    const row = this.insert.get(
      e.at,
      e.who,
      e.action,
      e.circuit,
      auditValueText(e.before),
      auditValueText(e.after),
      e.requestId,
      e.remote,
    )!;
    return toEntry(row);
  }

  appendOnce(e: AuditEntryInput, withinMs: number): AuditEntry | null {
    const after = auditValueText(e.after);
    const row = this.insertOnce.get(
      e.at,
      e.who,
      e.action,
      e.circuit,
      auditValueText(e.before),
      after,
      e.requestId,
      e.remote,
      e.action,
      after,
      e.at - withinMs,
    );
    return row === undefined ? null : toEntry(row);
  }

  page(q: AuditQuery): AuditPage {
    const values: Record<(typeof FILTERS)[number], unknown> = {
      circuit: q.circuit,
      who: q.who,
      action: q.action,
      since: q.since,
      until: q.until,
      before: q.before === undefined ? undefined : rowCursor(q.before),
    };
    const present = FILTERS.filter((f) => values[f] !== undefined);
    const statement = this.statement(present);
    const rows = statement.all(...present.map((f) => values[f]), q.limit + 1);
    const entries = rows.slice(0, q.limit).map(toEntry);
    return { entries, nextCursor: rows.length > q.limit ? entries.at(-1)!.id : null };
  }

  /**
   * The oldest `batch` rows are one range of the rowid: its bound, then a ranged DELETE of
   * those older than `before` (ids grow with time, as the transitions' age trim relies on).
   */
  trimByAge(before: number, batch: number): number {
    const bound = this.oldestBound.get(batch - 1) ?? this.newestId.get();
    if (bound == null) return 0;
    return this.deleteRange.run(bound, before).changes;
  }

  private statement(present: readonly (typeof FILTERS)[number][]): Database.Statement<unknown[], Row> {
    const key = present.join(',');
    let statement = this.pages.get(key);
    if (statement === undefined) {
      const where = present.length === 0 ? '' : `WHERE ${present.map((f) => CONDITION[f]).join(' AND ')}`;
      statement = this.db.prepare<unknown[], Row>(`SELECT * FROM audit ${where} ORDER BY id DESC LIMIT ?`);
      this.pages.set(key, statement);
    }
    return statement;
  }
}

/** A SQLite cursor is a row id. */
function rowCursor(cursor: string): number {
  if (!/^\d{1,15}$/.test(cursor)) throw badCursor(); // SqliteAuditTable.cursorPattern
  return Number(cursor);
}

export function badCursor(): AppError {
  return new AppError('INVALID_QUERY', 'The query string has invalid parameters.', {
    fields: [{ field: 'before', message: 'must be the next_cursor of a previous page' }],
  });
}
