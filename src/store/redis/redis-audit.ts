import { createHash } from 'node:crypto';
import {
  auditValueText,
  matchesAuditQuery,
  type AuditEntry,
  type AuditEntryInput,
  type AuditPage,
  type AuditQuery,
} from '../../domain/audit-entry.js';
import { AppError } from '../../domain/errors.js';
import type { AuditStore } from '../audit-store.js';
import type { RedisCommands } from './redis-commands.js';

/**
 * Entries the stream keeps at most (`XADD ... MAXLEN ~`), whatever their age: a bound on
 * Redis memory (an entry is a few hundred bytes: some 500 MB at most). The housekeeping job
 * trims by `audit.retention_days` well before this in any ordinary use.
 */
export const AUDIT_STREAM_MAX_LENGTH = 1_000_000;
/** Entries one page reads at most while filtering; past it the page ends short with a cursor to go on from. */
const SCAN_BUDGET = 10_000;
const SCAN_CHUNK = 1_000;

type StreamEntry = [id: string, fields: string[]];

/**
 * The audit log on Redis: one stream (`<prefix>{audit}:audit`, one Cluster slot), appended
 * with `XADD` right after the change it records is written, with Redis' own ids (time-ordered:
 * the cursor of `GET /audit`). Pages read it newest first with `XREVRANGE`, filtering as they
 * go; the housekeeping job trims it by each entry's `at` (XTRIM MINID), as the transitions'
 * stream is trimmed.
 */
export class RedisAuditStream implements AuditStore {
  readonly key: string;
  readonly cursorPattern = /^\d{1,20}-\d{1,20}$/;

  constructor(
    private readonly redis: RedisCommands,
    prefix: string,
  ) {
    this.key = `${prefix}{audit}:audit`;
  }

  async append(e: AuditEntryInput): Promise<AuditEntry> {
    const before = auditValueText(e.before);
    const after = auditValueText(e.after);
    const fields = ['at', String(e.at), 'who', e.who, 'action', e.action];
    if (e.circuit !== null) fields.push('circuit', e.circuit);
    if (before !== null) fields.push('before', before);
    if (after !== null) fields.push('after', after);
    if (e.requestId !== null) fields.push('request_id', e.requestId);
    if (e.remote !== null) fields.push('remote', e.remote);
    const id = await this.redis.command<string>([
      'XADD',
      this.key,
      'MAXLEN',
      '~',
      String(AUDIT_STREAM_MAX_LENGTH),
      '*',
      ...fields,
    ]);
    return { ...e, id, before, after };
  }

  /** A `SET NX PX` marker per action and `after` (in the stream's slot) decides which process appends. */
  async appendOnce(e: AuditEntryInput, withinMs: number): Promise<AuditEntry | null> {
    const digest = createHash('sha256')
      .update(`${e.action}\n${auditValueText(e.after) ?? ''}`)
      .digest('hex');
    const marker = `${this.key}:once:${digest}`;
    const set = await this.redis.command<string | null>([
      'SET',
      marker,
      '1',
      'NX',
      'PX',
      String(Math.max(1, withinMs)),
    ]);
    return set === null ? null : this.append(e);
  }

  async page(q: AuditQuery): Promise<AuditPage> {
    if (q.before !== undefined && !this.cursorPattern.test(q.before)) throw badCursor();
    const entries: AuditEntry[] = [];
    let from = q.before === undefined ? '+' : `(${q.before}`;
    for (let scanned = 0; scanned < SCAN_BUDGET; ) {
      const chunk = await this.redis.command<StreamEntry[]>(
        ['XREVRANGE', this.key, from, '-', 'COUNT', String(SCAN_CHUNK)],
        'read',
      );
      for (const raw of chunk) {
        scanned++;
        const entry = toEntry(raw);
        if (entry !== null && matchesAuditQuery(entry, q)) {
          if (entries.length === q.limit) return { entries, nextCursor: entries.at(-1)!.id };
          entries.push(entry);
        }
        from = `(${raw[0]}`;
      }
      if (chunk.length < SCAN_CHUNK) return { entries, nextCursor: null };
    }
    // The scan budget ran out: the page ends here, and the next one goes on from the last id read.
    return { entries, nextCursor: from.slice(1) };
  }

  async trimByAge(before: number, batch: number): Promise<number> {
    const entries = await this.redis.command<StreamEntry[]>(['XRANGE', this.key, '-', '+', 'COUNT', String(batch)]);
    let old = 0;
    while (old < entries.length && atOf(entries[old]![1]) < before) old++;
    if (old === 0) return 0;
    const last = entries[old - 1]![0];
    const minId = old < entries.length ? entries[old]![0] : nextId(last);
    return this.redis.command<number>(['XTRIM', this.key, 'MINID', minId]);
  }
}

/** The id right after `id` (`<ms>-<seq+1>`): XTRIM MINID keeps it and everything newer. */
function nextId(id: string): string {
  const [ms, seq] = id.split('-');
  return `${ms}-${BigInt(seq ?? '0') + 1n}`;
}

function fieldMap(fields: readonly string[]): Map<string, string> {
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) map.set(fields[i]!, fields[i + 1]!);
  return map;
}

/** A stream entry's `at`; a malformed one counts as young (kept, and it stops the trim). */
function atOf(fields: readonly string[]): number {
  return Number(fieldMap(fields).get('at')) || Infinity;
}

/** An entry as stored; one without a time, identity or action (a hand edit) is skipped. */
function toEntry([id, fields]: StreamEntry): AuditEntry | null {
  const f = fieldMap(fields);
  const at = Number(f.get('at'));
  const who = f.get('who');
  const action = f.get('action');
  if (!Number.isFinite(at) || who === undefined || action === undefined) return null;
  return {
    id,
    at,
    who,
    action,
    circuit: f.get('circuit') ?? null,
    before: f.get('before') ?? null,
    after: f.get('after') ?? null,
    requestId: f.get('request_id') ?? null,
    remote: f.get('remote') ?? null,
  };
}

function badCursor(): AppError {
  return new AppError('INVALID_QUERY', 'The query string has invalid parameters.', {
    fields: [{ field: 'before', message: 'must be the next_cursor of a previous page' }],
  });
}
