import type Database from 'better-sqlite3';
import type { CallerEntry } from '../../domain/caller-state.js';
import type { Circuit } from '../../domain/circuit.js';
import { planCallerWrites } from '../caller-writes.js';

export { planCallerWrites, type CallerWritePlan } from '../caller-writes.js';

const NONE: readonly CallerEntry[] = Object.freeze([]);

const FIELDS = 'caller, failures, failed_at, slow_at, isolated_until, isolated_seconds, probe_until';

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
      .prepare<[number], CallerEntry>(`SELECT ${FIELDS} FROM caller_entries WHERE circuit_id = ? ORDER BY seq`)
      .raw();
    this.selectMaxSeq = db
      .prepare<[number], number>('SELECT coalesce(max(seq), 0) FROM caller_entries WHERE circuit_id = ?')
      .pluck();
    this.upsert = db.prepare(
      `INSERT INTO caller_entries (circuit_id, ${FIELDS}, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (circuit_id, caller) DO UPDATE SET failures = excluded.failures, failed_at = excluded.failed_at,
         slow_at = excluded.slow_at, isolated_until = excluded.isolated_until,
         isolated_seconds = excluded.isolated_seconds, probe_until = excluded.probe_until, seq = excluded.seq`,
    );
    this.updateFields = db.prepare(
      `UPDATE caller_entries SET failures = ?, failed_at = ?, slow_at = ?, isolated_until = ?, isolated_seconds = ?,
         probe_until = ? WHERE circuit_id = ? AND caller = ?`,
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
    return entries.length === 0 ? c : { ...c, callers: entries };
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
    for (const e of changed) this.updateFields.run(e[1], e[2], e[3], e[4], e[5], e[6], circuitId, e[0]);
    if (appended.length === 0) return;
    let seq = this.selectMaxSeq.get(circuitId) ?? 0;
    for (const e of appended) this.upsert.run(circuitId, e[0], e[1], e[2], e[3], e[4], e[5], e[6], ++seq);
  }
}
