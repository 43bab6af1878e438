import { AppError } from '../domain/errors.js';
import type { LoggedTransition, TransitionReader } from '../store/transition-reader.js';

/** Where a resuming stream starts in a cursor reader, or why it cannot. */
export type CursorResume =
  | { readonly afterId: number; readonly skip: ReadonlySet<number>; readonly base: readonly number[] }
  | { readonly reset: 'unknown-event-id' | 'expired' };

/**
 * A transitions reader whose event ids are cursors over shards (the Redis store's feed:
 * `src/store/redis/event-cursor.ts`) rather than row ids (SQLite). `id` stays the position a
 * hub pages by; what a client sees and hands back is `eventId`.
 */
export interface CursorReader extends TransitionReader {
  resume(text: string): Promise<CursorResume | null>;
  eventId(t: LoggedTransition, base: readonly number[] | null): string;
  cursor(): string;
}

export const isCursorReader = (log: TransitionReader): log is CursorReader =>
  typeof (log as Partial<CursorReader>).resume === 'function';

/** How a stream starts: from `lastId` (null: live), after an optional `reset`; `send` filters and names the events. */
export interface StreamStart {
  readonly lastId: number | null;
  readonly reset: { readonly reason: 'unknown-event-id' | 'expired'; readonly newest_id: number | string } | null;
  /** The event's id as sent, or null to skip it (a client that saw it from another host). */
  readonly idOf: (t: LoggedTransition) => string | null;
}

/**
 * A cursor reader's `Last-Event-ID`: a cursor resumes exactly (`CursorResume`); a number (an id
 * of a store before shards) or a cursor this host cannot resume from gets `event: reset` and
 * the stream goes on live; anything else is a 400. Null when the reader has no cursors.
 */
export async function cursorStart(log: TransitionReader, header: string | undefined): Promise<StreamStart | null> {
  if (!isCursorReader(log)) return null;
  const live: StreamStart = { lastId: null, reset: null, idOf: (t) => log.eventId(t, null) };
  if (header === undefined || header === '') return live;
  const resume = await log.resume(header);
  if (resume === null && !/^\d{1,15}$/.test(header))
    throw new AppError('INVALID_HEADER', 'Last-Event-ID must be the id of an event this server sent.');
  if (resume === null || 'reset' in resume)
    return { ...live, reset: { reason: resume?.reset ?? 'unknown-event-id', newest_id: log.cursor() } };
  const { afterId, skip, base } = resume;
  return { lastId: afterId, reset: null, idOf: (t) => (skip.has(t.id) ? null : log.eventId(t, base)) };
}
