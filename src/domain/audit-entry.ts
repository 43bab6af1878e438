/**
 * The audit log's entries (issue 30): one per change a person or service makes, naming who
 * made it, what it changed and from where. Plain data; the stores keep it (SQLite table
 * `audit`, a Redis stream), `GET /audit` pages it. Pure: no I/O, no clock.
 */
import type { EpochMs } from './types.js';

/** What was done. The force actions and `manual_reset` are the transition reasons they make. */
export const AUDIT_ACTIONS = [
  'circuit_created',
  'policy_changed',
  'forced_open',
  'forced_closed',
  'force_cleared',
  'manual_reset',
  'circuit_deleted',
  // Issue 31: a PATCH that sets, clears or promotes a circuit's shadow policy.
  'shadow_set',
  'shadow_cleared',
  'shadow_promoted',
  'backup',
  'credentials_reloaded',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** One change, as a route (or the credentials reload) records it. */
export interface AuditEntryInput {
  readonly at: EpochMs;
  /** The credential id (`identityOf(c).id`), `anonymous` when no credential is configured. */
  readonly who: string;
  readonly action: AuditAction;
  readonly circuit: string | null;
  /** The values the action changed, before and after (JSON-able; null: none, as a created or deleted circuit's side). */
  readonly before: unknown;
  readonly after: unknown;
  readonly requestId: string | null;
  /** The remote address of the request (no port); null when unknown (a signal, a test). */
  readonly remote: string | null;
}

/** A stored entry: its cursor (`id`, the store's own: a row id, a stream id) and `before`/`after` as bounded JSON text. */
export interface AuditEntry {
  readonly id: string;
  readonly at: EpochMs;
  readonly who: string;
  readonly action: string;
  readonly circuit: string | null;
  readonly before: string | null;
  readonly after: string | null;
  readonly requestId: string | null;
  readonly remote: string | null;
}

/** A page of `GET /audit`: newest first; every filter optional. */
export interface AuditQuery {
  readonly limit: number;
  /** Keyset cursor: only entries older than this id (the previous page's `nextCursor`). */
  readonly before?: string;
  readonly circuit?: string;
  readonly who?: string;
  readonly action?: string;
  /** Epoch ms, inclusive. */
  readonly since?: EpochMs;
  /** Epoch ms, exclusive. */
  readonly until?: EpochMs;
}

export interface AuditPage {
  readonly entries: readonly AuditEntry[];
  /** Where the next (older) page starts; null when there is none. */
  readonly nextCursor: string | null;
}

/** `before`/`after` are kept whole up to this many bytes of JSON each (a whole circuit is about 1 KiB). */
export const AUDIT_VALUE_MAX_BYTES = 4 * 1024; // 4 KiB: a page of 1,000 entries holds at most some 8 MiB

/** A value as the JSON text an entry keeps: null for none, a `{"truncated":true,"bytes":n}` marker past the bound. */
export function auditValueText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = JSON.stringify(value);
  const bytes = utf8Length(text);
  return bytes <= AUDIT_VALUE_MAX_BYTES ? text : JSON.stringify({ truncated: true, bytes });
}

/** Whether an entry passes a query's filters (the Redis store filters as the SQLite SQL does). */
export function matchesAuditQuery(e: AuditEntry, q: AuditQuery): boolean {
  return (
    (q.circuit === undefined || e.circuit === q.circuit) &&
    (q.who === undefined || e.who === q.who) &&
    (q.action === undefined || e.action === q.action) &&
    (q.since === undefined || e.at >= q.since) &&
    (q.until === undefined || e.at < q.until)
  );
}

/** UTF-8 length without a Buffer (domain/ uses no node:). */
function utf8Length(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) n += 1;
    else if (code < 0x800) n += 2;
    else if (code >= 0xd800 && code <= 0xdbff) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}
