import type Database from 'better-sqlite3';
import type { Circuit, CircuitState, Step, Transition } from '../domain/circuit.js';
import type { BackoffPolicy, ForcedState, WindowPolicy } from '../domain/policy.js';
import type { ThrottlePolicy, ThrottleState } from '../domain/throttle.js';
import type { WindowState } from '../domain/window.js';
import { AppError } from '../domain/errors.js';
import type { MaybePromise } from './maybe-promise.js';

export interface ListQuery {
  readonly state?: CircuitState;
  /** Keyset cursor: only circuits with a larger id. */
  readonly afterId?: number;
  readonly limit: number;
  /** With `state`: filter by the state a read at `now` would show (expired open is half-open). */
  readonly now?: number;
}

/** One step of a batch: the circuit it applies to and the pure step. */
export interface BatchItem {
  readonly name: string;
  readonly step: (current: Circuit | null) => Step | null;
}

/**
 * Where circuits live. `apply` is the one atomic read-modify-write around the pure
 * state machine: the step sees the current circuit (or null) and returns the next one.
 * Answers may be synchronous (SQLite always; Redis from its cache) or a Promise (a Redis
 * round trip): see `maybe-promise.ts`. A step may run more than once (a retry after a
 * conflicting write elsewhere), so it must be pure.
 */
export interface CircuitStore {
  find(name: string): MaybePromise<Circuit | null>;
  /**
   * Run `step` on the stored circuit and persist what it returns, with its transitions,
   * atomically. A step returning null, or the very circuit it was given, writes nothing.
   */
  apply<S extends Step>(name: string, step: (current: Circuit | null) => S | null): MaybePromise<S | null>;
  /**
   * Apply the steps in order in one write transaction; a circuit created by one step is
   * seen by the next, and each changed circuit is written once. All or nothing.
   */
  applyBatch(items: readonly BatchItem[]): MaybePromise<(Step | null)[]>;
  /** Remove the circuit and its events; false if unknown. */
  delete(name: string): MaybePromise<boolean>;
  list(query: ListQuery): MaybePromise<Circuit[]>;
  events(circuitId: number, limit: number): MaybePromise<Transition[]>;
  ping(): MaybePromise<boolean>;
  /** How many circuits are stored, in O(1) (`limits.max_circuits`); absent: unbounded. */
  count?(): MaybePromise<number>;
  /** Names of up to `limit` circuits stored open whose `openUntil` is at or before `now`, earliest first. */
  dueOpen(now: number, limit: number): MaybePromise<string[]>;
}

interface CircuitRow {
  id: number;
  name: string;
  state: CircuitState;
  failure_count: number;
  failure_threshold: number;
  timeout_seconds: number;
  half_open_max_calls: number;
  probe_leases: string;
  open_until: number | null;
  half_open_at: number | null;
  last_failure_at: number | null;
  created_at: number;
  updated_at: number;
  success_threshold: number;
  window_policy: string | null;
  backoff_policy: string | null;
  forced_state: ForcedState | null;
  probe_successes: number;
  open_timeout_seconds: number | null;
  reopen_count: number;
  window_state: string | null;
  state_changed_at: number | null;
  throttle_policy: string | null;
  throttle_state: string | null;
}

const CACHE_MAX_ENTRIES = 10_000; // bounds memory against lookups of many distinct names

const NO_LEASES: readonly number[] = Object.freeze([]);

function fromRow(row: CircuitRow): Circuit {
  return {
    id: row.id,
    name: row.name,
    state: row.state,
    failureCount: row.failure_count,
    failureThreshold: row.failure_threshold,
    timeoutSeconds: row.timeout_seconds,
    halfOpenMaxCalls: row.half_open_max_calls,
    probeLeases: row.probe_leases === '[]' ? NO_LEASES : (JSON.parse(row.probe_leases) as number[]),
    openUntil: row.open_until,
    halfOpenAt: row.half_open_at,
    lastFailureAt: row.last_failure_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    successThreshold: row.success_threshold,
    window: row.window_policy === null ? null : (JSON.parse(row.window_policy) as WindowPolicy),
    backoff: row.backoff_policy === null ? null : (JSON.parse(row.backoff_policy) as BackoffPolicy),
    forcedState: row.forced_state,
    probeSuccesses: row.probe_successes,
    openTimeoutSeconds: row.open_timeout_seconds,
    reopenCount: row.reopen_count,
    windowState: row.window_state === null ? null : (JSON.parse(row.window_state) as WindowState),
    stateChangedAt: row.state_changed_at,
    throttle: row.throttle_policy === null ? null : (JSON.parse(row.throttle_policy) as ThrottlePolicy),
    throttleState: row.throttle_state === null ? null : (JSON.parse(row.throttle_state) as ThrottleState),
  };
}

const json = (value: unknown) => (value === null ? null : JSON.stringify(value));

/** A circuit as its SQLite row (snake_case columns, JSON text): also what the metrics read. */
export function toParams(c: Circuit) {
  return {
    id: c.id,
    name: c.name,
    state: c.state,
    failure_count: c.failureCount,
    failure_threshold: c.failureThreshold,
    timeout_seconds: c.timeoutSeconds,
    half_open_max_calls: c.halfOpenMaxCalls,
    probe_leases: c.probeLeases.length === 0 ? '[]' : JSON.stringify(c.probeLeases),
    open_until: c.openUntil,
    half_open_at: c.halfOpenAt,
    last_failure_at: c.lastFailureAt,
    created_at: c.createdAt,
    updated_at: c.updatedAt,
    success_threshold: c.successThreshold,
    window_policy: json(c.window),
    backoff_policy: json(c.backoff),
    forced_state: c.forcedState,
    probe_successes: c.probeSuccesses,
    open_timeout_seconds: c.openTimeoutSeconds,
    reopen_count: c.reopenCount,
    window_state: json(c.windowState),
    state_changed_at: c.stateChangedAt ?? null,
    throttle_policy: json(c.throttle ?? null),
    throttle_state: json(c.throttleState ?? null),
  };
}

const COLUMNS = `id, name, state, failure_count, failure_threshold, timeout_seconds, half_open_max_calls,
  probe_leases, open_until, half_open_at, last_failure_at, created_at, updated_at, success_threshold, window_policy,
  backoff_policy, forced_state, probe_successes, open_timeout_seconds, reopen_count, window_state, state_changed_at,
  throttle_policy, throttle_state`;

function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_BUSY_SNAPSHOT';
}

/** SQLite implementation; statements are prepared once. */
export class SqliteCircuitStore implements CircuitStore {
  private readonly selectByName;
  private readonly insertCircuit;
  private readonly updateCircuit;
  private readonly insertTransition;
  private readonly listOpenAt;
  private readonly listHalfOpenAt;
  private readonly deleteByName;
  private readonly writeBatch;
  private readonly selectEvents;
  private readonly selectPing;
  private readonly listAll;
  private readonly listByState;
  private readonly writeStep;
  private readonly selectDataVersion;
  private readonly selectCount;
  private readonly selectDueOpen;
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
    this.selectByName = db.prepare<[string], CircuitRow>(`SELECT ${COLUMNS} FROM circuits WHERE name = ?`);
    this.insertCircuit = db.prepare(`INSERT INTO circuits (${COLUMNS.replace('id, ', '')})
      VALUES (${COLUMNS.replace('id, ', '').split(',').map((col) => `@${col.trim()}`).join(', ')})`);
    this.updateCircuit = db.prepare(`UPDATE circuits SET state = @state, failure_count = @failure_count,
      failure_threshold = @failure_threshold, timeout_seconds = @timeout_seconds,
      half_open_max_calls = @half_open_max_calls, probe_leases = @probe_leases, open_until = @open_until,
      half_open_at = @half_open_at, last_failure_at = @last_failure_at, updated_at = @updated_at,
      success_threshold = @success_threshold, window_policy = @window_policy, backoff_policy = @backoff_policy,
      forced_state = @forced_state, probe_successes = @probe_successes, open_timeout_seconds = @open_timeout_seconds,
      reopen_count = @reopen_count, window_state = @window_state, state_changed_at = @state_changed_at,
      throttle_policy = @throttle_policy, throttle_state = @throttle_state
      WHERE id = @id`);
    this.insertTransition = db.prepare(
      'INSERT INTO transitions (circuit_id, from_state, to_state, reason, at) VALUES (?, ?, ?, ?, ?)',
    );
    // The state a read would show: an open circuit whose time has passed is half-open.
    this.listOpenAt = db.prepare<[number, number, number], CircuitRow>(
      `SELECT ${COLUMNS} FROM circuits WHERE state = 'open' AND open_until > ? AND id > ? ORDER BY id LIMIT ?`,
    );
    this.listHalfOpenAt = db.prepare<[number, number, number], CircuitRow>(
      `SELECT ${COLUMNS} FROM circuits WHERE (state = 'half_open' OR (state = 'open' AND open_until <= ?))
       AND id > ? ORDER BY id LIMIT ?`,
    );
    this.deleteByName = db.prepare<[string]>('DELETE FROM circuits WHERE name = ?');
    this.selectEvents = db.prepare<[number, number], { from_state: CircuitState; to_state: CircuitState; reason: Transition['reason']; at: number }>(
      'SELECT from_state, to_state, reason, at FROM transitions WHERE circuit_id = ? ORDER BY id DESC LIMIT ?',
    );
    this.selectPing = db.prepare('SELECT 1').pluck();
    this.selectDataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
    this.selectCount = db.prepare<[], number>('SELECT n FROM circuit_count WHERE id = 1').pluck();
    // Uses the (state, id) index: only the open circuits are read.
    this.selectDueOpen = db.prepare<[number, number], string>(
      `SELECT name FROM circuits WHERE state = 'open' AND open_until <= ? ORDER BY open_until LIMIT ?`,
    ).pluck();
    this.listAll = db.prepare<[number, number], CircuitRow>(
      `SELECT ${COLUMNS} FROM circuits WHERE id > ? ORDER BY id LIMIT ?`,
    );
    this.listByState = db.prepare<[string, number, number], CircuitRow>(
      `SELECT ${COLUMNS} FROM circuits WHERE state = ? AND id > ? ORDER BY id LIMIT ?`,
    );
    // BEGIN IMMEDIATE takes the write lock before the read, so concurrent processes
    // serialise on it and never act on a stale row (https://www.sqlite.org/lang_transaction.html).
    this.writeStep = db.transaction(<S extends Step>(name: string, step: (c: Circuit | null) => S | null) => {
      const current = this.read(name);
      const result = step(current);
      if (result === null || result.circuit === current) return result;
      this.cache.delete(name); // until the commit succeeds
      let id = result.circuit.id;
      if (current === null) {
        id = Number(this.insertCircuit.run(toParams(result.circuit)).lastInsertRowid);
      } else {
        this.updateCircuit.run(toParams(result.circuit));
      }
      for (const t of result.transitions) this.insertTransition.run(id, t.from, t.to, t.reason, t.at);
      return id === result.circuit.id ? result : { ...result, circuit: { ...result.circuit, id } };
    });
    this.writeBatch = db.transaction((items: readonly BatchItem[]) => this.runBatch(items));
  }

  /** The body of `applyBatch`'s transaction; see there. */
  private runBatch(items: readonly BatchItem[]): { results: (Step | null)[]; latest: Map<string, Circuit | null> } {
    const latest = new Map<string, Circuit | null>(); // each circuit after the steps so far
    const stored = new Map<string, Circuit | null>(); // each circuit as its row now holds it
    const events: [number, Transition][] = [];
    const results = items.map(({ name, step }) => {
      if (!latest.has(name)) {
        const row = this.read(name);
        latest.set(name, row);
        stored.set(name, row);
      }
      const current = latest.get(name) ?? null;
      let result = step(current);
      if (result === null || result.circuit === current) return result;
      if (current === null) {
        // Insert at once: the id is needed for its events and by the following steps.
        const id = Number(this.insertCircuit.run(toParams(result.circuit)).lastInsertRowid);
        result = { ...result, circuit: { ...result.circuit, id } };
        stored.set(name, result.circuit);
      }
      latest.set(name, result.circuit);
      for (const t of result.transitions) events.push([result.circuit.id, t]);
      return result;
    });
    for (const [name, circuit] of latest) {
      if (circuit !== null && circuit !== stored.get(name)) this.updateCircuit.run(toParams(circuit));
    }
    for (const [id, t] of events) this.insertTransition.run(id, t.from, t.to, t.reason, t.at);
    return { results, latest };
  }

  private read(name: string): Circuit | null {
    const row = this.selectByName.get(name);
    return row === undefined ? null : fromRow(row);
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
    const version = this.exclusive ? 0 : (this.selectDataVersion.get() as number);
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
      for (const item of items) this.cache.delete(item.name); // until the commit succeeds
      const { results, latest } = this.writeBatch.immediate(items);
      for (const [name, circuit] of latest) this.cache.set(name, circuit);
      return results;
    });
  }

  delete(name: string): boolean {
    return this.guard(() => {
      const deleted = this.deleteByName.run(name).changes > 0;
      this.cache.set(name, null);
      return deleted;
    });
  }

  list(query: ListQuery): Circuit[] {
    return this.guard(() => {
      const after = query.afterId ?? 0;
      const now = query.now;
      let rows: CircuitRow[];
      if (query.state === undefined) rows = this.listAll.all(after, query.limit);
      else if (now !== undefined && query.state === 'open') rows = this.listOpenAt.all(now, after, query.limit);
      else if (now !== undefined && query.state === 'half_open') rows = this.listHalfOpenAt.all(now, after, query.limit);
      else rows = this.listByState.all(query.state, after, query.limit);
      return rows.map(fromRow);
    });
  }

  events(circuitId: number, limit: number): Transition[] {
    return this.guard(() =>
      this.selectEvents.all(circuitId, limit).map((r) => ({ from: r.from_state, to: r.to_state, reason: r.reason, at: r.at })),
    );
  }

  ping(): boolean {
    return this.guard(() => this.selectPing.get() === 1);
  }

  /** The circuit count the triggers of migration 0005 keep: one row, not a table scan. */
  count(): number {
    return this.guard(() => this.selectCount.get() ?? 0);
  }

  /** Drop a circuit from the cache after a statement outside this class deleted it (housekeeping). */
  forget(name: string): void {
    this.cache.delete(name);
  }

  dueOpen(now: number, limit: number): string[] {
    return this.guard(() => this.selectDueOpen.all(now, limit) as string[]);
  }

  private guard<T>(fn: () => T): T {
    try {
      return fn();
    } catch (error) {
      if (isBusy(error)) {
        throw new AppError('STORAGE_BUSY', 'The database is busy; try again shortly.', { retryAfterSeconds: 1, cause: error });
      }
      if ((error as { code?: unknown } | null)?.code === 'SQLITE_FULL') {
        throw new AppError('STORAGE_FULL', 'The disk holding the database is full; nothing was written.', { retryAfterSeconds: 10, cause: error });
      }
      throw error;
    }
  }
}
