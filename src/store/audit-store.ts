import type { AuditEntry, AuditEntryInput, AuditPage, AuditQuery } from '../domain/audit-entry.js';
import type { MaybePromise } from './maybe-promise.js';

/**
 * Where audit entries live (`sqlite/audit-table.ts`, `redis/redis-audit.ts`): appended one
 * at a time, read newest first in pages, trimmed by age by the housekeeping job.
 */
export interface AuditStore {
  /** What this store's page cursors look like (SQLite: a row id; Redis: a stream id), for the query's 400 and the OpenAPI document. */
  readonly cursorPattern: RegExp;
  /** Store one entry; answers it as stored (with its id) once it is durable as the store's writes are. */
  append(entry: AuditEntryInput): MaybePromise<AuditEntry>;
  /**
   * Store the entry unless one with the same action and `after` was stored at or after
   * `entry.at - withinMs` (atomically: of several processes doing the same at once, one
   * stores it); null when it was not stored.
   */
  appendOnce(entry: AuditEntryInput, withinMs: number): MaybePromise<AuditEntry | null>;
  /** A page newest first; a malformed `before` cursor throws AppError INVALID_QUERY. */
  page(query: AuditQuery): MaybePromise<AuditPage>;
  /** Delete up to `batch` of the oldest entries older than `before` (epoch ms); how many went. */
  trimByAge(before: number, batch: number): MaybePromise<number>;
}
