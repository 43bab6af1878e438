import type Database from 'better-sqlite3';
import type { LeaseStore } from '../lease-store.js';

/**
 * Leases on named singleton jobs, shared by every process on the database file.
 * `tryAcquire` both takes a free or expired lease and renews one already held.
 */
export class SqliteLeaseStore implements LeaseStore {
  private readonly upsert;
  private readonly remove;

  constructor(db: Database.Database) {
    // One statement, so it is atomic without an explicit transaction: the row is taken only
    // if nobody holds it, its holder is us, or the holder let it expire.
    this.upsert = db.prepare<{ name: string; owner: string; now: number; expiresAt: number }>(
      `INSERT INTO leases (name, owner, expires_at) VALUES (@name, @owner, @expiresAt)
       ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
       WHERE leases.owner = excluded.owner OR leases.expires_at <= @now`,
    );
    this.remove = db.prepare<[string, string]>('DELETE FROM leases WHERE name = ? AND owner = ?');
  }

  /** True when `owner` holds `name` until `now + ttlMs` after this call. */
  tryAcquire(name: string, owner: string, now: number, ttlMs: number): boolean {
    return this.upsert.run({ name, owner, now, expiresAt: now + ttlMs }).changes === 1;
  }

  /** Give the lease up early (on shutdown) so another process need not wait for expiry. */
  release(name: string, owner: string): void {
    this.remove.run(name, owner);
  }
}
