import fs from 'node:fs';
import path from 'node:path';
import type Database from 'better-sqlite3';
import type { Logger } from 'pino';
import type { CallerEntry } from '../../domain/caller-state.js';
import type { CallerCounts } from '../../domain/types.js';
import type { Circuit, Step, Transition } from '../../domain/circuit.js';
import { AppError } from '../../domain/errors.js';
import type { BatchItem, CircuitStore, HealthReport, HistoryQuery, ListQuery } from '../circuit-store.js';
import { stepEntries, type HistoryHook, type StoredEntry } from '../../domain/history.js';
import { HISTORY_DEFAULTS, type HistorySettings } from '../../domain/history-settings.js';
import { circuitFromColumns, circuitToColumns, type ColumnValue } from '../../domain/circuit-record.js';
import { prepareCircuitStatements, type CircuitStatements, type CircuitValues } from './circuit-statements.js';
import { planCallerWrites } from '../caller-writes.js';
import { detailText, parseTransitionDetail } from '../../domain/transition-detail.js';

const CACHE_MAX_ENTRIES = 10_000; // bounds memory against lookups of many distinct names
const NO_ENTRIES: readonly StoredEntry[] = Object.freeze([]);

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_BUSY_SNAPSHOT';
}

/** SQLite implementation; statements are prepared once. */
export class SqliteCircuitStore implements CircuitStore {
  private readonly sql: CircuitStatements;
  private readonly callerRows: CallerRows;
  private readonly historyRows: HistoryTable;
  private readonly writeBatch;
  private readonly writeStep;
  /** Circuits as last read or written by this connection; see `cached`. */
  private readonly cache = new Map<string, Circuit | null>();
  private cacheVersion = -1;

  /**
   * @param exclusive the connection holds the file alone (see `openDatabase`), so nobody
   *   else can commit and the cache needs no `data_version` check.
   * @param history config `history` (issue 31): what the writes keep in the `history` table.
   */
  constructor(
    db: Database.Database,
    private readonly exclusive = false,
    private readonly historySettings: HistorySettings = HISTORY_DEFAULTS,
  ) {
    this.sql = prepareCircuitStatements(db);
    this.callerRows = new CallerRows(db);
    this.historyRows = new HistoryTable(db, historySettings);
    // BEGIN IMMEDIATE takes the write lock before the read, so concurrent processes
    // serialise on it and never act on a stale row (https://www.sqlite.org/lang_transaction.html).
    this.writeStep = db.transaction(
      <S extends Step>(name: string, step: (c: Circuit | null) => S | null, history?: HistoryHook) =>
        this.writeOne(name, step, history),
    );
    this.writeBatch = db.transaction((items: readonly BatchItem[]) => this.runBatch(items));
  }

  /**
   * What the history keeps of one write (issue 31, `CircuitStore.apply`): the hook's entry, then
   * one per transition, stamped with the entry's `t` (hook-less: the transition's own `at`).
   * Nothing when the history is off for the circuit (config or its policy field `history`).
   */
  private historyOf(before: Circuit | null, result: Step, hook: HistoryHook | undefined): readonly StoredEntry[] {
    if (!this.keepsHistory(result.circuit)) return NO_ENTRIES;
    const entry = hook === undefined ? null : hook(before, result);
    if (entry === null && result.transitions.length === 0) return NO_ENTRIES;
    return stepEntries(entry, result.transitions);
  }

  /** The body of `apply`'s write transaction: read under the lock, step, write. */
  private writeOne<S extends Step>(
    name: string,
    step: (c: Circuit | null) => S | null,
    history?: HistoryHook,
  ): S | null {
    const current = this.readLocked(name);
    const result = step(current);
    if (result === null) return result;
    const entries = this.historyOf(current, result, history);
    // An outcome is history whether or not it changed the circuit: only its entry is written then.
    if (result.circuit === current) {
      if (entries.length > 0) this.historyRows.append(new Map([[current!.id, entries]]));
      return result;
    }
    this.cache.delete(name); // until the commit succeeds
    let id = result.circuit.id;
    if (current === null) {
      id = this.insert(result.circuit);
    } else {
      this.update(result.circuit, current);
    }
    for (const t of result.transitions) this.sql.insertTransition.run(id, t.from, t.to, t.reason, t.at, detailText(t));
    if (entries.length > 0) this.historyRows.append(new Map([[id, entries]]));
    return id === result.circuit.id ? result : { ...result, circuit: { ...result.circuit, id } };
  }

  /** The body of `applyBatch`'s transaction; see there. */
  private runBatch(items: readonly BatchItem[]): { results: (Step | null)[]; latest: Map<string, Circuit | null> } {
    const latest = new Map<string, Circuit | null>(); // each circuit after the steps so far
    const stored = new Map<string, Circuit | null>(); // each circuit as its row now holds it
    const events: [number, Transition][] = [];
    const entries = new Map<number, StoredEntry[]>(); // each circuit's history entries, in order
    const results = items.map(({ name, step, history }) => {
      if (!latest.has(name)) {
        const row = this.readLocked(name);
        latest.set(name, row);
        stored.set(name, row);
      }
      const current = latest.get(name) ?? null;
      let result = step(current);
      if (result === null) return result;
      const kept = this.historyOf(current, result, history);
      if (result.circuit === current) {
        if (kept.length > 0) appendTo(entries, current!.id, kept);
        return result;
      }
      if (current === null) {
        // Insert at once: the id is needed for its events and by the following steps.
        const id = this.insert(result.circuit);
        result = { ...result, circuit: { ...result.circuit, id } };
        stored.set(name, result.circuit);
      }
      latest.set(name, result.circuit);
      for (const t of result.transitions) events.push([result.circuit.id, t]);
      if (kept.length > 0) appendTo(entries, result.circuit.id, kept);
      return result;
    });
    for (const [name, circuit] of latest) {
      const row = stored.get(name) ?? null;
      if (circuit !== null && circuit !== row && row !== null) this.update(circuit, row);
    }
    for (const [id, t] of events) this.sql.insertTransition.run(id, t.from, t.to, t.reason, t.at, detailText(t));
    if (entries.size > 0) this.historyRows.append(entries);
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

  apply<S extends Step>(name: string, step: (current: Circuit | null) => S | null, history?: HistoryHook): S | null {
    return this.guard(() => {
      // Optimistic first pass without the lock: most calls (a check on a closed circuit,
      // a success with no failures counted) change nothing and need no write at all,
      // unless the history keeps them (an outcome is history even when it changed nothing).
      const current = this.cached(name);
      const result = step(current);
      if (result === null) return result;
      if (result.circuit === current && !this.keepsEntry(current, result, history)) return result;
      const written = this.writeStep.immediate(name, step, history) as S | null;
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

  /** `keepsHistory` of domain/history-settings.ts, written out: this is every write's path. */
  private keepsHistory(circuit: Circuit): boolean {
    return this.historySettings.enabled && circuit.history !== false;
  }

  /** Whether the history keeps something of a step that left `current` as it was (its hook's entry): a write. */
  keepsEntry(current: Circuit | null, result: Step, history: HistoryHook | undefined): boolean {
    return (
      history !== undefined &&
      this.keepsHistory(result.circuit) &&
      (history(current, result) !== null || result.transitions.length > 0)
    );
  }

  /** A circuit's history in write order (issue 31), null if the circuit is unknown. */
  history(name: string, query: HistoryQuery): StoredEntry[] | null {
    return this.guard(() => {
      const circuit = this.cached(name);
      return circuit === null ? null : this.historyRows.read(circuit.id, query);
    });
  }

  /** Deletes the circuit with its transitions and caller entries (ON DELETE CASCADE) and its history (a trigger). */
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

  /** Circuits whose names fall in `ranges` (`nameRanges`), counted up to `atMost` each: index reads only. */
  countNamed(ranges: readonly (readonly [string, string])[], atMost: number): number {
    return this.guard(() => {
      let n = 0;
      for (const [from, to] of ranges) n += this.sql.countNamesIn.get(from, to, atMost) ?? 0;
      return n;
    });
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

/** Add `list` to the entries kept for circuit `id` (a batch's, in order). */
function appendTo(entries: Map<number, StoredEntry[]>, id: number, list: readonly StoredEntry[]): void {
  const held = entries.get(id);
  if (held === undefined) entries.set(id, [...list]);
  else held.push(...list);
}

/** Free space at which a disk that was full counts as usable again. */
const RECOVERED_FREE_BYTES = 1024 * 1024; // 1 MiB

/**
 * Watches the database file under a store. A write first checks that the file on disk is
 * still the one we opened: once it is deleted (or replaced), SQLite would go on writing
 * into an unlinked inode and acknowledge changes a restart loses, so writes are refused
 * with 503 from then on. A full disk is remembered until a write commits again or the
 * disk has room, so `/health` can say so even when no write is being tried.
 */
export class StorageHealth {
  private readonly file: string;
  private readonly identity: { dev: number; ino: number };
  private lost: 'deleted' | 'replaced' | null = null;
  private full = false;

  constructor(
    file: string,
    private readonly logger: Logger,
    private readonly freeBytes: (folder: string) => number = (folder) => {
      const s = fs.statfsSync(folder);
      return s.bavail * s.bsize;
    },
  ) {
    this.file = path.resolve(file);
    const stat = fs.statSync(this.file);
    this.identity = { dev: stat.dev, ino: stat.ino };
  }

  /** The store with these checks around every write. */
  wrap(store: SqliteCircuitStore): CircuitStore & { health(): HealthReport } {
    const apply = <S extends Step>(
      name: string,
      step: (current: Circuit | null) => S | null,
      history?: HistoryHook,
    ): S | null => {
      let writes = false;
      // The step runs just before its result is written (and once more under the lock); a
      // history entry of an unchanged circuit is a write too (issue 31).
      const checked = (current: Circuit | null) => {
        const result = step(current);
        writes = result !== null && (result.circuit !== current || store.keepsEntry(current, result, history));
        if (writes) this.assertFileIntact();
        return result;
      };
      try {
        const result = store.apply(name, checked, history);
        if (writes) this.noteRoom('a write committed');
        return result;
      } catch (error) {
        if (error instanceof AppError && error.code === 'STORAGE_FULL') this.noteFull();
        throw error;
      }
    };
    // A batch (group commit) and a delete are writes whatever their steps say.
    const write = <T>(run: () => T): T => {
      this.assertFileIntact();
      try {
        const result = run();
        this.noteRoom('a write committed');
        return result;
      } catch (error) {
        if (error instanceof AppError && error.code === 'STORAGE_FULL') this.noteFull();
        throw error;
      }
    };
    return {
      find: (name) => store.find(name),
      peek: (name) => store.peek(name),
      apply,
      applyBatch: (items) => write(() => store.applyBatch(items)),
      delete: (name) => write(() => store.delete(name)),
      list: (query) => store.list(query),
      events: (id, limit) => store.events(id, limit),
      ping: () => store.ping(),
      count: () => store.count(),
      countNamed: (ranges, atMost) => store.countNamed(ranges, atMost),
      dueOpen: (now, limit) => store.dueOpen(now, limit),
      history: (name, query) => store.history(name, query),
      health: () => this.report(() => store.ping()),
    };
  }

  /** For `/health`: failed once the file is gone, degraded while the disk is full. */
  report(ping: () => boolean): HealthReport {
    this.checkIdentity();
    if (this.lost) {
      return {
        status: 'failed',
        storage: this.lost,
        detail: `the database file was ${this.lost} while the service ran; restart it`,
      };
    }
    if (this.full && this.freeBytes(path.dirname(this.file)) >= RECOVERED_FREE_BYTES)
      this.noteRoom('the disk has room again');
    if (this.full)
      return {
        status: 'degraded',
        storage: 'full',
        detail: 'the disk holding the database is full; writes answer 503',
      };
    return { status: ping() ? 'ok' : 'unavailable' };
  }

  private assertFileIntact(): void {
    this.checkIdentity();
    if (this.lost) {
      throw new AppError(
        'STORAGE_UNAVAILABLE',
        `The database file was ${this.lost} while the service ran; nothing was written.`,
      );
    }
  }

  /** One stat of the path: gone, or another inode, means our open file is no longer the database. */
  private checkIdentity(): void {
    if (this.lost) return;
    const stat = fs.statSync(this.file, { throwIfNoEntry: false });
    if (stat !== undefined && stat.dev === this.identity.dev && stat.ino === this.identity.ino) return;
    this.lost = stat === undefined ? 'deleted' : 'replaced';
    this.logger.error(
      { event: 'storage_lost', db: this.file, reason: this.lost },
      `the database file was ${this.lost}; refusing writes until restart`,
    );
  }

  private noteFull(): void {
    if (this.full) return;
    this.full = true;
    this.logger.error(
      { event: 'storage_full', db: this.file },
      'the disk holding the database is full; writes answer 503 storage-full',
    );
  }

  private noteRoom(why: string): void {
    if (!this.full) return;
    this.full = false;
    this.logger.info({ event: 'storage_recovered', db: this.file }, `storage usable again: ${why}`);
  }
}

const NONE: readonly CallerEntry[] = Object.freeze([]);

/** A `caller_entries` row as read: the entry's members, the voter NULL when none. */
type Voted = [...CallerCounts, voter: string | null];

const FIELDS = 'caller, failures, failed_at, slow_at, isolated_until, isolated_seconds, probe_until, voter';

/**
 * The `caller_entries` table (migration 0008): a circuit's caller table as one row per caller,
 * ordered by `seq`. Writes go through `write`, inside the store's transaction, and touch only
 * the rows a step changed, added or dropped.
 */
export class CallerRows {
  private readonly selectEntries;
  private readonly selectMaxSeq;
  private readonly upsert;
  private readonly updateFields;
  private readonly deleteOne;

  constructor(db: Database.Database) {
    // Columns in the tuple's order, read as arrays: each row is a CallerEntry as it is.
    this.selectEntries = db
      .prepare<[number], Voted>(`SELECT ${FIELDS} FROM caller_entries WHERE circuit_id = ? ORDER BY seq`)
      .raw();
    this.selectMaxSeq = db
      .prepare<[number], number>('SELECT coalesce(max(seq), 0) FROM caller_entries WHERE circuit_id = ?')
      .pluck();
    this.upsert = db.prepare(
      `INSERT INTO caller_entries (circuit_id, ${FIELDS}, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (circuit_id, caller) DO UPDATE SET failures = excluded.failures, failed_at = excluded.failed_at,
         slow_at = excluded.slow_at, isolated_until = excluded.isolated_until,
         isolated_seconds = excluded.isolated_seconds, probe_until = excluded.probe_until, voter = excluded.voter,
         seq = excluded.seq`,
    );
    this.updateFields = db.prepare(
      `UPDATE caller_entries SET failures = ?, failed_at = ?, slow_at = ?, isolated_until = ?, isolated_seconds = ?,
         probe_until = ?, voter = ? WHERE circuit_id = ? AND caller = ?`,
    );
    this.deleteOne = db.prepare('DELETE FROM caller_entries WHERE circuit_id = ? AND caller = ?');
  }

  /**
   * The circuit with its caller table, as the domain keeps it: absent when empty. Only a circuit
   * with a quorum has one (a policy without a quorum drops it: `withoutQuorum`).
   */
  attach(c: Circuit): Circuit {
    if (c.quorum === undefined) return c;
    const entries = this.selectEntries.all(c.id);
    if (entries.length === 0) return c;
    // A row without a voter (migration 0011: NULL) is the domain's entry without one: 7 members.
    for (const e of entries) if (e[7] === null) (e as unknown[]).length = 7;
    return { ...c, callers: entries as CallerEntry[] };
  }

  /** Write the rows that turn the circuit's table `before` into `after`; nothing when they are the same array. */
  write(
    circuitId: number,
    before: readonly CallerEntry[] | undefined,
    after: readonly CallerEntry[] | undefined,
  ): void {
    if (before === after) return;
    const { deleted, changed, appended } = planCallerWrites(before ?? NONE, after ?? NONE);
    for (const caller of deleted) this.deleteOne.run(circuitId, caller);
    for (const e of changed) this.updateFields.run(e[1], e[2], e[3], e[4], e[5], e[6], e[7] ?? null, circuitId, e[0]);
    if (appended.length === 0) return;
    let seq = this.selectMaxSeq.get(circuitId) ?? 0;
    for (const e of appended) this.upsert.run(circuitId, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7] ?? null, ++seq);
  }
}

/**
 * The bounds are kept in the write path, amortized: when a write carries a circuit's `seq` past
 * a multiple of this, the entries past `max_outcomes` and older than `max_age_hours` among its
 * oldest (`TRIM_SCAN` more than the write added) are deleted. So a circuit holds at most `max_outcomes + TRIM_EVERY - 1`
 * entries, and an entry past its age goes at that circuit's next trim (docs/operations.md#history).
 */
export const TRIM_EVERY = 1_024;
/**
 * Oldest entries one trim looks at besides those the write added: at least what was added since
 * the last trim (at most TRIM_EVERY before this write), and as much again, so it catches up after a lowered bound.
 */
const TRIM_SCAN = 2 * TRIM_EVERY;
const HOUR_MS = 3_600_000;
/** Rows one INSERT statement writes at most (4 parameters a row, far below SQLite's 32,766). */
const ROWS_PER_INSERT = 32;

/**
 * The `history` table (migration 0012): each circuit's entries as `(circuit_id, seq, t, e)`.
 * Written only inside the store's write transactions (the lock makes `max(seq) + 1` safe across
 * workers), read by `read`; a circuit's rows go with it (the trigger `circuits_history_delete`).
 */
export class HistoryTable {
  private readonly lastSeq;
  /** `INSERT` statements of 1 to ROWS_PER_INSERT rows, prepared when first needed. */
  private readonly inserts: Database.Statement<ColumnValue[]>[] = [];
  private readonly trimOld;
  private readonly select;

  constructor(
    private readonly db: Database.Database,
    private readonly settings: HistorySettings,
  ) {
    this.lastSeq = db
      .prepare<[number], number>('SELECT seq FROM history WHERE circuit_id = ? ORDER BY seq DESC LIMIT 1')
      .pluck();
    // The oldest TRIM_SCAN rows of the circuit (one range of the primary key), those past either bound.
    this.trimOld = db.prepare<{ id: number; keepAfter: number; before: number; scan: number }>(
      `DELETE FROM history WHERE circuit_id = @id AND seq IN (
         SELECT seq FROM history WHERE circuit_id = @id ORDER BY seq LIMIT @scan
       ) AND (seq <= @keepAfter OR t < @before)`,
    );
    this.select = db
      .prepare<[number, number, number, number], [number, string]>(
        'SELECT t, e FROM history WHERE circuit_id = ? AND t >= ? AND t < ? ORDER BY seq LIMIT ?',
      )
      .raw();
  }

  /**
   * Append each circuit's entries in order, inside the caller's write transaction, and trim the
   * circuits that are due. The rows of all circuits go in multi-row INSERTs (up to
   * ROWS_PER_INSERT a statement): one call into SQLite per 32 rows rather than per row.
   */
  append(entries: ReadonlyMap<number, readonly StoredEntry[]>): void {
    const values: ColumnValue[] = [];
    const due: [id: number, first: number, seq: number, now: number][] = [];
    for (const [id, list] of entries) {
      if (list.length === 0) continue;
      const first = this.lastSeq.get(id) ?? 0;
      let seq = first;
      for (const e of list) values.push(id, ++seq, e.t, e.text);
      // The newest entry's time stands for now: the store has no clock, and the step's `now` is the write's time.
      if (Math.floor(seq / TRIM_EVERY) !== Math.floor(first / TRIM_EVERY)) due.push([id, first, seq, list.at(-1)!.t]);
    }
    const rows = values.length / 4;
    for (let at = 0; at < rows; at += ROWS_PER_INSERT) {
      const n = Math.min(ROWS_PER_INSERT, rows - at);
      this.insertOf(n).run(...values.slice(at * 4, (at + n) * 4));
    }
    for (const [id, first, seq, now] of due)
      this.trimOld.run({
        id,
        keepAfter: seq - this.settings.maxOutcomes,
        before: now - this.settings.maxAgeHours * HOUR_MS,
        scan: seq - first + TRIM_SCAN,
      });
  }

  private insertOf(rows: number): Database.Statement<ColumnValue[]> {
    let statement = this.inserts[rows - 1];
    if (statement === undefined) {
      const tuples = Array.from({ length: rows }, () => '(?, ?, ?, ?)').join(', ');
      statement = this.db.prepare<ColumnValue[]>(`INSERT INTO history (circuit_id, seq, t, e) VALUES ${tuples}`);
      this.inserts[rows - 1] = statement;
    }
    return statement;
  }

  /** A circuit's entries in write order, `query` bounding them by time and count. */
  read(circuitId: number, query: HistoryQuery): StoredEntry[] {
    const from = query.from ?? Number.MIN_SAFE_INTEGER;
    const to = query.to ?? Number.MAX_SAFE_INTEGER;
    return this.select.all(circuitId, from, to, query.limit).map(([t, text]) => ({ t, text }));
  }
}
