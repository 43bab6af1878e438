import { detailWire } from '../domain/transition-detail.js';
import type { LoggedTransition } from '../store/transition-reader.js';
import type { AuditEntry } from '../domain/audit-entry.js';
import { auditEntryWire } from '../audit/audit-wire.js';

/** `event: audit` (issue 30): one audit entry as `GET /audit` shows it; no `id:`, so Last-Event-ID stays a transition's. */
export function auditFrame(e: AuditEntry): Buffer {
  return Buffer.from(`event: audit\ndata: ${JSON.stringify(auditEntryWire(e))}\n\n`);
}

/** The `data:` of one transition event. */
export function transitionData(t: LoggedTransition): string {
  return JSON.stringify({
    circuit: t.circuit,
    from: t.from,
    to: t.to,
    reason: t.reason,
    at: new Date(t.at).toISOString(),
    ...detailWire(t),
  });
}

/** The first bytes of every stream: a comment, so the head and a first chunk leave at once. */
export const HELLO_FRAME = Buffer.from(': circuitlog event stream\n\n');
export const HEARTBEAT_FRAME = Buffer.from(': heartbeat\n\n');

interface Frames {
  readonly data: string;
  /** The frame under the id most streams send it with (the first one asked for). */
  readonly id: string;
  readonly bytes: Buffer;
}

/**
 * One transition is serialised once however many streams it goes to: the live tail hands the
 * same row object to every stream, and the frame is kept beside that object (a WeakMap, so it
 * goes when the row does). Streams that name the event differently (a Redis stream resumed from
 * another host's cursor) get their own frame over the same `data:`. Never changed once made.
 */
const cache = new WeakMap<LoggedTransition, Frames>();

/** `event: transition` with its `id:` and `data:`, as bytes shared by every stream that sends it. */
export function transitionFrame(t: LoggedTransition, id: string): Buffer {
  const hit = cache.get(t);
  if (hit !== undefined && hit.id === id) return hit.bytes;
  const data = hit?.data ?? transitionData(t);
  const bytes = Buffer.from(`event: transition\nid: ${id}\ndata: ${data}\n\n`);
  if (hit === undefined) cache.set(t, { data, id, bytes });
  return bytes;
}
