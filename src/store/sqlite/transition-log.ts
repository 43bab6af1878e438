import type Database from 'better-sqlite3';
import type { CircuitState } from '../../domain/circuit.js';
import { parseTransitionDetail } from '../../domain/transition-detail.js';
import type { LoggedTransition, TransitionFilter, TransitionReader } from '../transition-reader.js';

interface Row {
  id: number;
  circuit: string;
  from_state: CircuitState;
  to_state: CircuitState;
  reason: string;
  at: number;
  detail: string | null;
}

const SELECT = `SELECT t.id, c.name AS circuit, t.from_state, t.to_state, t.reason, t.at, t.detail
  FROM transitions t JOIN circuits c ON c.id = t.circuit_id`;

const toTransition = (r: Row): LoggedTransition => {
  const t = { id: r.id, circuit: r.circuit, from: r.from_state, to: r.to_state, reason: r.reason, at: r.at };
  return r.detail === null ? t : { ...t, ...parseTransitionDetail(r.detail) };
};

/**
 * Reads the transitions table in id order, for the event stream (live tail and
 * Last-Event-ID replay) and the dashboard; prepared statements of its own, never writes.
 */
export class TransitionLog implements TransitionReader {
  private readonly selectMaxId;
  private readonly selectAfter;
  private readonly selectAfterByName;
  private readonly selectAfterByPrefix;
  private readonly selectLatest;
  private readonly selectLastPerCircuit;
  private readonly selectLastOfNames;

  constructor(db: Database.Database) {
    this.selectMaxId = db.prepare<[], number>('SELECT coalesce(max(id), 0) FROM transitions').pluck();
    this.selectAfter = db.prepare<[number, number], Row>(`${SELECT} WHERE t.id > ? ORDER BY t.id LIMIT ?`);
    this.selectAfterByName = db.prepare<[number, string, number], Row>(
      `${SELECT} WHERE t.id > ? AND c.name = ? ORDER BY t.id LIMIT ?`,
    );
    // substr() rather than LIKE: '_' and '%' are legal in names and must match literally.
    this.selectAfterByPrefix = db.prepare<[number, string, string, number], Row>(
      `${SELECT} WHERE t.id > ? AND substr(c.name, 1, length(?)) = ? ORDER BY t.id LIMIT ?`,
    );
    this.selectLatest = db.prepare<[number], Row>(`${SELECT} ORDER BY t.id DESC LIMIT ?`);
    this.selectLastPerCircuit = db.prepare<[], Row>(
      `${SELECT} WHERE t.id IN (SELECT max(id) FROM transitions GROUP BY circuit_id)`,
    );
    // By name through the UNIQUE index, then each circuit's newest row through transitions_circuit.
    this.selectLastOfNames = db.prepare<[string], Row>(
      `${SELECT} WHERE t.id IN (SELECT (SELECT max(x.id) FROM transitions x WHERE x.circuit_id = k.id)
        FROM circuits k WHERE k.name IN (SELECT value FROM json_each(?)))`,
    );
  }

  /** The newest transition id, 0 when there is none. */
  maxId(): number {
    return this.selectMaxId.get()!;
  }

  /** Up to `limit` transitions with id > `afterId` that match `filter`, oldest first. */
  after(afterId: number, limit: number, filter: TransitionFilter = {}): LoggedTransition[] {
    const rows =
      filter.circuit !== undefined
        ? this.selectAfterByName.all(afterId, filter.circuit, limit)
        : filter.prefix !== undefined
          ? this.selectAfterByPrefix.all(afterId, filter.prefix, filter.prefix, limit)
          : this.selectAfter.all(afterId, limit);
    return rows.map(toTransition);
  }

  /** The `limit` newest transitions of all circuits, newest first. */
  latest(limit: number): LoggedTransition[] {
    return this.selectLatest.all(limit).map(toTransition);
  }

  /** Each circuit's newest transition, by circuit name; with `names`, of those only. */
  lastPerCircuit(names?: readonly string[]): Map<string, LoggedTransition> {
    const rows =
      names === undefined
        ? this.selectLastPerCircuit.all()
        : names.length === 0
          ? []
          : this.selectLastOfNames.all(JSON.stringify(names));
    return new Map(rows.map((r) => [r.circuit, toTransition(r)]));
  }
}
