import type Database from 'better-sqlite3';
import type { CircuitState } from '../../domain/circuit.js';
import type { ForcedState, RampPolicy, WindowPolicy } from '../../domain/policy.js';
import type { ThrottlePolicy, ThrottleState } from '../../domain/throttle.js';
import type { WindowState } from '../../domain/window.js';
import type { CapCutoff, GaugeCircuit, SnapshotReader, StateCounts } from '../snapshot-reader.js';

const STATES: readonly CircuitState[] = ['closed', 'open', 'half_open'];
const FORCED: readonly (ForcedState | null)[] = [null, 'open', 'closed'];
const HAS_WINDOW = 16;
const PACK = 32; // id * PACK + code: exact for ids below 2^48

/** The columns of a circuit with a window, a throttle or a quorum, read only for those circuits. */
type ExtraRow = [
  number,
  string | null,
  string | null,
  string | null,
  string | null,
  string | null,
  string | null,
  number | null,
];
type Extras = Pick<
  GaugeCircuit,
  'window' | 'windowState' | 'throttle' | 'throttleState' | 'isolatedCallers' | 'ramp' | 'rampUntil'
>;

/**
 * Read-only views of the circuits table for /metrics, with prepared statements of its
 * own. It never writes: the lazy open -> half-open step is computed in SQL, not stored.
 */
export class CircuitSnapshot implements SnapshotReader {
  private readonly countByState;
  private readonly countAll;
  private readonly firstCodes;
  private readonly namesFrom;
  private readonly windowsTo;
  private readonly isolatedTo;
  private readonly nthId;
  private readonly maxId;
  /** Circuit names by id (a circuit's name never changes; a new circuit has a new id). */
  private readonly names = new Map<number, string>();

  constructor(db: Database.Database) {
    const effective = `CASE WHEN state = 'open' AND open_until <= @now THEN 'half_open' ELSE state END`;
    // Only the circuits that are not closed (the circuits_state index), and the trigger-kept total
    // (migration 0005): a scrape reads no more rows as closed circuits grow in number.
    this.countByState = db.prepare<{ now: number }, { state: CircuitState; n: number }>(
      `SELECT ${effective} AS state, count(*) AS n FROM circuits WHERE state IN ('open', 'half_open') GROUP BY 1`,
    );
    this.countAll = db.prepare<[], number>('SELECT n FROM circuit_count WHERE id = 1').pluck();
    // What the gauges read of each circuit as one integer (no row object, no string): its id
    // times 32 plus its state, force and whether it has a window. With 10,000 rows, making
    // objects and strings of the columns was most of a scrape's time (a row object per circuit
    // alone cost four times this). Names are read once per id (cached); the window columns
    // only of circuits that have a window.
    const code = `(CASE WHEN state = 'open' AND open_until <= @now THEN 2 WHEN state = 'open' THEN 1 WHEN state = 'half_open' THEN 2 ELSE 0 END)
      + (CASE forced_state WHEN 'open' THEN 4 WHEN 'closed' THEN 8 ELSE 0 END) + (CASE WHEN window_policy IS NULL AND throttle_policy IS NULL AND quorum_policy IS NULL AND ramp_policy IS NULL THEN 0 ELSE ${HAS_WINDOW} END)`;
    this.firstCodes = db
      .prepare<{ now: number; limit: number }, number>(
        `SELECT id * ${PACK} + ${code} FROM circuits ORDER BY id LIMIT @limit`,
      )
      .pluck();
    this.namesFrom = db
      .prepare<[number, number], [number, string]>('SELECT id, name FROM circuits WHERE id >= ? ORDER BY id LIMIT ?')
      .raw();
    this.windowsTo = db
      .prepare<[number], ExtraRow>(
        `SELECT id, window_policy, window_state, throttle_policy, throttle_state, quorum_policy, ramp_policy, ramp_until
       FROM circuits WHERE id <= ?
       AND (window_policy IS NOT NULL OR throttle_policy IS NOT NULL OR quorum_policy IS NOT NULL OR ramp_policy IS NOT NULL)`,
      )
      .raw();
    // Isolated callers per circuit (`isolated_until` set: the domain's isolatedCallerCount), counted
    // in SQL over the caller_entries rows (migration 0008): no caller table is read into memory.
    this.isolatedTo = db
      .prepare<[number], [number, number]>(
        `SELECT circuit_id, count(*) FROM caller_entries WHERE circuit_id <= ? AND isolated_until IS NOT NULL
       GROUP BY circuit_id`,
      )
      .raw();
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
    const packed = this.firstCodes.all({ now, limit });
    if (packed.length === 0) return [];
    const ids = packed.map((p) => Math.floor(p / PACK));
    this.readNames(ids, limit);
    const windowed = packed.some((p) => p % PACK >= HAS_WINDOW) ? this.windows(ids.at(-1)!) : null;
    return ids.map((id, i): GaugeCircuit => {
      const code = packed[i]! % PACK;
      const w = code >= HAS_WINDOW ? windowed!.get(id) : undefined;
      return {
        id,
        name: this.names.get(id)!,
        state: STATES[code & 3]!,
        forcedState: FORCED[(code >> 2) & 3]!,
        window: w?.window ?? null,
        windowState: w?.windowState ?? null,
        throttle: w?.throttle ?? null,
        throttleState: w?.throttleState ?? null,
        isolatedCallers: w?.isolatedCallers ?? null,
        ramp: w?.ramp ?? null,
        rampUntil: w?.rampUntil ?? null,
      };
    });
  }

  /** Names of the ids not cached yet (after start, only circuits new inside the cap), from the first missing one on. */
  private readNames(ids: readonly number[], limit: number): void {
    let missing = ids.findIndex((id) => !this.names.has(id));
    if (missing === -1) return;
    if (this.names.size > 2 * limit) {
      this.names.clear(); // ids left behind by deletes: read them all again
      missing = 0;
    }
    for (const [id, name] of this.namesFrom.all(ids[missing]!, ids.length - missing)) this.names.set(id, name);
  }

  /** The window, throttle and quorum figures of each circuit up to `lastId` that has one of them. */
  private windows(lastId: number): Map<number, Extras> {
    const out = new Map<number, Extras>();
    const rows = this.windowsTo.all(lastId);
    const isolated = rows.some((r) => r[5] !== null) ? new Map(this.isolatedTo.all(lastId)) : null;
    for (const [
      id,
      windowPolicy,
      windowJson,
      throttlePolicy,
      throttleJson,
      quorumPolicy,
      rampPolicy,
      rampUntil,
    ] of rows) {
      const window = windowPolicy === null ? null : (JSON.parse(windowPolicy) as WindowPolicy);
      const throttle = throttlePolicy === null ? null : (JSON.parse(throttlePolicy) as ThrottlePolicy);
      out.set(id, {
        window,
        windowState: window === null || windowJson === null ? null : (JSON.parse(windowJson) as WindowState),
        throttle,
        throttleState: throttle === null || throttleJson === null ? null : (JSON.parse(throttleJson) as ThrottleState),
        isolatedCallers: quorumPolicy === null ? null : (isolated?.get(id) ?? 0),
        ramp: rampPolicy === null ? null : (JSON.parse(rampPolicy) as RampPolicy),
        rampUntil,
      });
    }
    return out;
  }

  /** The id of the `limit`-th circuit by creation, or the newest id when there are fewer. */
  capCutoff(limit: number): CapCutoff {
    if (limit <= 0) return { lastId: 0, full: true };
    const nth = this.nthId.get(limit - 1);
    return nth === undefined ? { lastId: this.maxId.get()!, full: false } : { lastId: nth, full: true };
  }
}
