import type Database from 'better-sqlite3';
import type { Circuit, Step, Transition } from '../../domain/circuit.js';
import { AppError } from '../../domain/errors.js';
import type { BatchItem, CircuitStore, ListQuery } from '../circuit-store.js';
import { circuitFromColumns, circuitToColumns } from '../../domain/circuit-record.js';
import { prepareCircuitStatements, type CircuitStatements, type CircuitValues } from './circuit-statements.js';
import { CallerRows } from './caller-rows.js';
import { detailText, parseTransitionDetail } from '../../domain/transition-detail.js';

const CACHE_MAX_ENTRIES = 10_000; // bounds memory against lookups of many distinct names

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_BUSY_SNAPSHOT';
}

/** SQLite implementation; statements are prepared once. */
export class SqliteCircuitStore implements CircuitStore {
  private readonly sql: CircuitStatements;
  private readonly callerRows: CallerRows;
  private readonly writeBatch;
  private readonly writeStep;
  /** Circuits as last read or written by this connection; see `cached`. */
  private readonly cache = new Map<string, Circuit | null>();
  private cacheVersion = -1;

  /**
   * @param exclusive the connection holds the file alone (see `openDatabase`), so nobody
   *   else can commit and the cache needs no `data_version` check.
   */
  constructor(
    db: Database.Database,
    private readonly exclusive = false,
  ) {
    this.sql = prepareCircuitStatements(db);
    this.callerRows = new CallerRows(db);
    // BEGIN IMMEDIATE takes the write lock before the read, so concurrent processes
    // serialise on it and never act on a stale row (https://www.sqlite.org/lang_transaction.html).
    this.writeStep = db.transaction(<S extends Step>(name: string, step: (c: Circuit | null) => S | null) =>
      this.writeOne(name, step),
    );
    this.writeBatch = db.transaction((items: readonly BatchItem[]) => this.runBatch(items));
  }

  /** The body of `apply`'s write transaction: read under the lock, step, write. */
  private writeOne<S extends Step>(name: string, step: (c: Circuit | null) => S | null): S | null {
    const current = this.readLocked(name);
    const result = step(current);
    if (result === null || result.circuit === current) return result;
    this.cache.delete(name); // until the commit succeeds
    let id = result.circuit.id;
    if (current === null) {
      id = this.insert(result.circuit);
    } else {
      this.update(result.circuit, current);
    }
    for (const t of result.transitions) this.sql.insertTransition.run(id, t.from, t.to, t.reason, t.at, detailText(t));
    return id === result.circuit.id ? result : { ...result, circuit: { ...result.circuit, id } };
  }

  /** The body of `applyBatch`'s transaction; see there. */
  private runBatch(items: readonly BatchItem[]): { results: (Step | null)[]; latest: Map<string, Circuit | null> } {
    const latest = new Map<string, Circuit | null>(); // each circuit after the steps so far
    const stored = new Map<string, Circuit | null>(); // each circuit as its row now holds it
    const events: [number, Transition][] = [];
    const results = items.map(({ name, step }) => {
      if (!latest.has(name)) {
        const row = this.readLocked(name);
        latest.set(name, row);
        stored.set(name, row);
      }
      const current = latest.get(name) ?? null;
      let result = step(current);
      if (result === null || result.circuit === current) return result;
      if (current === null) {
        // Insert at once: the id is needed for its events and by the following steps.
        const id = this.insert(result.circuit);
        result = { ...result, circuit: { ...result.circuit, id } };
        stored.set(name, result.circuit);
      }
      latest.set(name, result.circuit);
      for (const t of result.transitions) events.push([result.circuit.id, t]);
      return result;
    });
    for (const [name, circuit] of latest) {
      const row = stored.get(name) ?? null;
      if (circuit !== null && circuit !== row && row !== null) this.update(circuit, row);
    }
    for (const [id, t] of events) this.sql.insertTransition.run(id, t.from, t.to, t.reason, t.at, detailText(t));
    return { results, latest };
  }

  /** Insert a new circuit's row and its caller entries; its id. */
  private insert(c: Circuit): number {
    const id = Number(this.sql.insertCircuit.run(circuitToColumns(c)).lastInsertRowid);
    this.callerRows.write(id, undefined, c.callers);
    return id;
  }

  /**
   * Write `next` over the row that holds `stored`, and of its caller table only the entries that
   * changed: the steps keep the array when they leave it as it was and the entries they do not
   * touch (`domain/caller-state.ts`), so a step that changes one caller writes one entry row.
   */
  private update(next: Circuit, stored: Circuit): void {
    this.sql.updateCircuit.run(circuitToColumns(next));
    this.callerRows.write(stored.id, stored.callers, next.callers);
  }

  /**
   * The circuit as the write lock holds it. A connection that holds the file alone answers from
   * its cache: nobody else can have committed, and its own writes update the cache only after
   * their commit (a rolled-back one drops the entry). That saves re-reading the caller table
   * (up to 1,000 rows) under the lock on every write. Shared connections read the row.
   */
  private readLocked(name: string): Circuit | null {
    return this.exclusive ? this.cached(name) : this.read(name);
  }

  private read(name: string): Circuit | null {
    const row = this.sql.selectByName.get(name);
    return row === undefined ? null : this.callerRows.attach(circuitFromColumns(row));
  }

  /**
   * The circuit as of now, from memory when nobody else has committed since it was read.
   * `PRAGMA data_version` changes exactly when another connection (any process) commits
   * (https://www.sqlite.org/pragma.html#pragma_data_version), and is cheaper than the
   * row SELECT; our own commits update the cache directly. A connection that holds the
   * file exclusively skips even that check. The cache is only ever a
   * copy: the truth stays in the database, and every write re-reads under the lock.
   */
  private cached(name: string): Circuit | null {
    const version = this.exclusive ? 0 : (this.sql.selectDataVersion.get() as number);
    if (version !== this.cacheVersion || this.cache.size >= CACHE_MAX_ENTRIES) {
      this.cache.clear();
      this.cacheVersion = version;
    }
    const hit = this.cache.get(name);
    if (hit !== undefined) return hit;
    const circuit = this.read(name);
    this.cache.set(name, circuit);
    return circuit;
  }

  find(name: string): Circuit | null {
    return this.guard(() => this.cached(name));
  }

  /** Always at hand: SQLite answers from its cache or one indexed read. */
  peek(name: string): Circuit | null {
    return this.find(name);
  }

  apply<S extends Step>(name: string, step: (current: Circuit | null) => S | null): S | null {
    return this.guard(() => {
      // Optimistic first pass without the lock: most calls (a check on a closed circuit,
      // a success with no failures counted) change nothing and need no write at all.
      const current = this.cached(name);
      const result = step(current);
      if (result === null || result.circuit === current) return result;
      const written = this.writeStep.immediate(name, step) as S | null;
      if (written !== null) this.cache.set(name, written.circuit);
      return written;
    });
  }

  applyBatch(items: readonly BatchItem[]): (Step | null)[] {
    if (items.length === 0) return [];
    return this.guard(() => {
      try {
        const { results, latest } = this.writeBatch.immediate(items);
        for (const [name, circuit] of latest) this.cache.set(name, circuit);
        return results;
      } catch (error) {
        for (const item of items) this.cache.delete(item.name); // rolled back: read them again
        throw error;
      }
    });
  }

  delete(name: string): boolean {
    return this.guard(() => {
      const deleted = this.sql.deleteByName.run(name).changes > 0;
      this.cache.set(name, null);
      return deleted;
    });
  }

  list(query: ListQuery): Circuit[] {
    return this.guard(() => {
      const after = query.afterId ?? 0;
      const now = query.now;
      let rows: CircuitValues[]; // raw rows: the listings read many circuits at once
      if (query.state === undefined) rows = this.sql.listAll.all(after, query.limit);
      else if (now !== undefined && query.state === 'open') rows = this.sql.listOpenAt.all(now, after, query.limit);
      else if (now !== undefined && query.state === 'half_open')
        rows = this.sql.listHalfOpenAt.all(now, after, query.limit);
      else rows = this.sql.listByState.all(query.state, after, query.limit);
      return rows.map((v) => this.callerRows.attach(circuitFromColumns(v)));
    });
  }

  events(circuitId: number, limit: number): Transition[] {
    return this.guard(() =>
      this.sql.selectEvents.all(circuitId, limit).map((r) => ({
        from: r.from_state,
        to: r.to_state,
        reason: r.reason,
        at: r.at,
        ...parseTransitionDetail(r.detail),
      })),
    );
  }

  ping(): boolean {
    return this.guard(() => this.sql.selectPing.get() === 1);
  }

  /** The circuit count the triggers of migration 0005 keep: one row, not a table scan. */
  count(): number {
    return this.guard(() => this.sql.selectCount.get() ?? 0);
  }

  /** Drop a circuit from the cache after a statement outside this class deleted it (housekeeping). */
  forget(name: string): void {
    this.cache.delete(name);
  }

  dueOpen(now: number, limit: number): string[] {
    return this.guard(() => this.sql.selectDueOpen.all(now, now, limit) as string[]);
  }

  private guard<T>(fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      if (isBusy(error)) {
        throw new AppError('STORAGE_BUSY', 'The database is busy; try again shortly.', {
          retryAfterSeconds: 1,
          cause: error,
        });
      }
      if ((error as { code?: unknown } | null)?.code === 'SQLITE_FULL') {
        throw new AppError('STORAGE_FULL', 'The disk holding the database is full; nothing was written.', {
          retryAfterSeconds: 10,
          cause: error,
        });
      }
      throw error;
    }
  }
}
