import type Database from 'better-sqlite3';
import type { CircuitState } from '../../domain/circuit.js';
import type { ForcedState, WindowPolicy } from '../../domain/policy.js';
import type { WindowState } from '../../domain/window.js';
import type { CapCutoff, GaugeCircuit, SnapshotReader, StateCounts } from '../snapshot-reader.js';

/** The columns of a circuits row the gauges read. */
interface GaugeRow {
  id: number;
  name: string;
  forced_state: ForcedState | null;
  window_policy: string | null;
  window_state: string | null;
  effective_state: CircuitState;
}

/**
 * Read-only views of the circuits table for /metrics, with prepared statements of its
 * own. It never writes: the lazy open -> half-open step is computed in SQL, not stored.
 */
export class CircuitSnapshot implements SnapshotReader {
  private readonly countByState;
  private readonly countAll;
  private readonly firstCircuits;
  private readonly nthId;
  private readonly maxId;

  constructor(db: Database.Database) {
    const effective = `CASE WHEN state = 'open' AND open_until <= @now THEN 'half_open' ELSE state END`;
    // Only the circuits that are not closed (the circuits_state index), and the trigger-kept total
    // (migration 0005): a scrape reads no more rows as closed circuits grow in number.
    this.countByState = db.prepare<{ now: number }, { state: CircuitState; n: number }>(
      `SELECT ${effective} AS state, count(*) AS n FROM circuits WHERE state IN ('open', 'half_open') GROUP BY 1`,
    );
    this.countAll = db.prepare<[], number>('SELECT n FROM circuit_count WHERE id = 1').pluck();
    // Only the columns the gauges read (GaugeCircuit): with 10,000 rows, building every
    // column of each was most of a scrape's time and garbage.
    this.firstCircuits = db.prepare<{ now: number; limit: number }, GaugeRow>(
      `SELECT id, name, forced_state, window_policy, window_state, ${effective} AS effective_state
       FROM circuits ORDER BY id LIMIT @limit`,
    );
    // The rowid b-tree in order: stops after OFFSET + 1 entries, whatever the table's size.
    this.nthId = db.prepare<[number], number>('SELECT id FROM circuits ORDER BY id LIMIT 1 OFFSET ?').pluck();
    this.maxId = db.prepare<[], number>('SELECT coalesce(max(id), 0) FROM circuits').pluck();
  }

  /** How many circuits are in each state now; every state present, 0 when none. */
  stateCounts(now: number): StateCounts {
    const counts: StateCounts = { closed: 0, open: 0, half_open: 0 };
    for (const { state, n } of this.countByState.all({ now })) counts[state] += n;
    counts.closed = (this.countAll.get() ?? 0) - counts.open - counts.half_open;
    return counts;
  }

  /** The first `limit` circuits by creation (id), with their state as of `now`. */
  first(limit: number, now: number): GaugeCircuit[] {
    if (limit <= 0) return [];
    return this.firstCircuits.all({ now, limit }).map(toGauge);
  }

  /** The id of the `limit`-th circuit by creation, or the newest id when there are fewer. */
  capCutoff(limit: number): CapCutoff {
    if (limit <= 0) return { lastId: 0, full: true };
    const nth = this.nthId.get(limit - 1);
    return nth === undefined ? { lastId: this.maxId.get()!, full: false } : { lastId: nth, full: true };
  }
}

/** A row as typed values; the window's JSON is parsed only for circuits that have a window. */
function toGauge(row: GaugeRow): GaugeCircuit {
  const window = row.window_policy === null ? null : (JSON.parse(row.window_policy) as WindowPolicy);
  const windowState = window === null || row.window_state === null ? null : (JSON.parse(row.window_state) as WindowState);
  return { id: row.id, name: row.name, state: row.effective_state, forcedState: row.forced_state === 'open' || row.forced_state === 'closed' ? row.forced_state : null, window, windowState };
}
