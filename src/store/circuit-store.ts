import type { Circuit, CircuitState, Step, Transition } from '../domain/circuit.js';
import type { HistoryHook, StoredEntry } from '../domain/history.js';
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
  /**
   * The outcome history (issue 31, `domain/history.ts`): with the history on (config
   * `history.enabled`, and the circuit's own `history` not false), the store writes the entry
   * this answers (an outcome, a manual action) and then one entry per transition of the
   * result, in the same transaction as the circuit, even when the step left the circuit as it
   * was (an outcome is history whether or not it changed the state). A step answering null
   * writes nothing. Without a hook only the transitions are written.
   */
  readonly history?: HistoryHook;
}

/** Which entries of a circuit's history to read (`CircuitStore.history`). */
export interface HistoryQuery {
  /** Entries with `t` at or after this (epoch ms); absent: from the oldest kept. */
  readonly from?: number;
  /** Entries with `t` before this; absent: to the newest. */
  readonly to?: number;
  /** At most this many, oldest first (the reader's bound in memory). */
  readonly limit: number;
}

/**
 * Where circuits live: the one port both stores implement (`sqlite/circuit-store.ts`,
 * `redis/redis-store.ts`). `apply` is the one atomic read-modify-write around the pure
 * state machine: the step sees the current circuit (or null) and returns the next one.
 * Answers may be synchronous (SQLite always; Redis from its cache) or a Promise (a Redis
 * round trip): see `maybe-promise.ts`. A step may run more than once (a retry after a
 * conflicting write elsewhere), so it must be pure.
 */
export interface CircuitStore {
  find(name: string): MaybePromise<Circuit | null>;
  /**
   * The circuit when it is at hand without waiting (SQLite: always; Redis: from this host's
   * cache while no write to it is queued), else `undefined`: the synchronous fast path.
   * A step that changes nothing on this circuit answers exactly as `apply` would.
   */
  peek(name: string): Circuit | null | undefined;
  /**
   * Run `step` on the stored circuit and persist what it returns, with its transitions,
   * atomically. A step returning null, or the very circuit it was given, writes nothing.
   */
  apply<S extends Step>(
    name: string,
    step: (current: Circuit | null) => S | null,
    history?: HistoryHook,
  ): MaybePromise<S | null>;
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
  /**
   * A circuit's history entries in the order they were written (issue 31), as stored (each
   * decoded by `decodeEntry`); null if the circuit is unknown. Deleting a circuit deletes its history.
   */
  history(name: string, query: HistoryQuery): MaybePromise<StoredEntry[] | null>;
  /**
   * How many stored circuits have names in `ranges` (`nameRanges` of domain/circuit-name.ts),
   * each range counted up to `atMost`, reading an index rather than every circuit
   * (`max_new_circuits`); absent: the service reads the list.
   */
  countNamed?(ranges: readonly (readonly [string, string])[], atMost: number): MaybePromise<number>;
  /** Names of up to `limit` circuits stored open whose `openUntil` is at or before `now`, earliest first. */
  dueOpen(now: number, limit: number): MaybePromise<string[]>;
}

/** What `/health` answers: `ok` is 200, anything else 503. */
export interface HealthReport {
  readonly status: 'ok' | 'degraded' | 'failed' | 'unavailable';
  readonly storage?: 'full' | 'deleted' | 'replaced';
  readonly detail?: string;
  /** The store's schema version (docs/operations.md#schema-version); the server sets it. */
  readonly schema_version?: number;
}
