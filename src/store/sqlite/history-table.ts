import type Database from 'better-sqlite3';
import type { StoredEntry } from '../../domain/history.js';
import type { HistorySettings } from '../../domain/history-settings.js';
import type { HistoryQuery } from '../circuit-store.js';

/**
 * The bounds are kept in the write path, amortized: when a write carries a circuit's `seq` past
 * a multiple of this, the entries past `max_outcomes` and older than `max_age_hours` among its
 * oldest `TRIM_SCAN` are deleted. So a circuit holds at most `max_outcomes + TRIM_EVERY - 1`
 * entries, and an entry past its age goes at that circuit's next trim (docs/operations.md#history).
 */
export const TRIM_EVERY = 1_024;
/** Oldest entries one trim looks at: twice what was added since the last, so it catches up after a lowered bound. */
const TRIM_SCAN = 2 * TRIM_EVERY;
const HOUR_MS = 3_600_000;

/**
 * The `history` table (migration 0012): each circuit's entries as `(circuit_id, seq, t, e)`.
 * Written only inside the store's write transactions (the lock makes `max(seq) + 1` safe across
 * workers), read by `read`; a circuit's rows go with it (ON DELETE CASCADE).
 */
export class HistoryTable {
  private readonly lastSeq;
  private readonly insert;
  private readonly trimOld;
  private readonly select;

  constructor(
    db: Database.Database,
    private readonly settings: HistorySettings,
  ) {
    this.lastSeq = db
      .prepare<[number], number>('SELECT seq FROM history WHERE circuit_id = ? ORDER BY seq DESC LIMIT 1')
      .pluck();
    this.insert = db.prepare<[number, number, number, string]>(
      'INSERT INTO history (circuit_id, seq, t, e) VALUES (?, ?, ?, ?)',
    );
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

  /** Append a circuit's entries in order, inside the caller's write transaction; trims when due. */
  append(circuitId: number, entries: readonly StoredEntry[]): void {
    if (entries.length === 0) return;
    const first = this.lastSeq.get(circuitId) ?? 0;
    let seq = first;
    for (const e of entries) this.insert.run(circuitId, ++seq, e.t, e.text);
    if (Math.floor(seq / TRIM_EVERY) === Math.floor(first / TRIM_EVERY)) return;
    // The newest entry's time stands for now: the store has no clock, and the step's `now` is the write's time.
    const now = entries.at(-1)!.t;
    this.trimOld.run({
      id: circuitId,
      keepAfter: seq - this.settings.maxOutcomes,
      before: now - this.settings.maxAgeHours * HOUR_MS,
      scan: TRIM_SCAN,
    });
  }

  /** A circuit's entries in write order, `query` bounding them by time and count. */
  read(circuitId: number, query: HistoryQuery): StoredEntry[] {
    const from = query.from ?? Number.MIN_SAFE_INTEGER;
    const to = query.to ?? Number.MAX_SAFE_INTEGER;
    return this.select.all(circuitId, from, to, query.limit).map(([t, text]) => ({ t, text }));
  }
}
