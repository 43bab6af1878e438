import type { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { CIRCUIT_NAME_MAX_LENGTH } from '../config.js';
import { AppError } from '../domain/errors.js';
import { parseQuery } from '../http/request.js';
import type { LoggedTransition } from '../store/transition-log.js';
import type { EventHub } from './event-hub.js';
import type { Metrics } from './metrics.js';

export const HEARTBEAT_MS = 15_000; // 15 s: a comment line keeps proxies from closing an idle stream
const MAX_QUEUED_WRITES = 10_000; // a client this far behind is cut off; it reconnects with Last-Event-ID

const StreamQuery = z
  .object({
    circuit: z.string().min(1).max(CIRCUIT_NAME_MAX_LENGTH).optional(),
    prefix: z.string().min(1).max(CIRCUIT_NAME_MAX_LENGTH).optional(),
  })
  .strict()
  .refine((q) => q.circuit === undefined || q.prefix === undefined, { message: 'use circuit or prefix, not both', path: ['prefix'] });

/** The `data:` of one transition event. */
export function transitionData(t: LoggedTransition): string {
  return JSON.stringify({ circuit: t.circuit, from: t.from, to: t.to, reason: t.reason, at: new Date(t.at).toISOString() });
}

/** `Last-Event-ID` as a transition id, null when absent; anything else is a 400. */
function lastEventId(header: string | undefined): number | null {
  if (header === undefined || header === '') return null;
  if (!/^\d{1,15}$/.test(header)) throw new AppError('INVALID_HEADER', 'Last-Event-ID must be the numeric id of an event this server sent.');
  return Number(header);
}

/** `GET /metrics` (when metrics are on) and `GET /events/stream`. */
export function registerObserveRoutes<E extends object>(
  app: Hono<E>,
  deps: { metrics?: Metrics; hub: EventHub; heartbeatMs?: number; maxQueuedWrites?: number },
): void {
  const { metrics, hub } = deps;
  if (metrics) {
    app.get('/metrics', async (c) => {
      let text: string;
      try {
        text = await metrics.render();
      } catch (error) {
        throw error instanceof AppError ? error : new AppError('STORAGE_BUSY', 'Metrics could not be gathered; try again shortly.', { retryAfterSeconds: 1, cause: error });
      }
      return c.body(text, 200, { 'content-type': metrics.contentType });
    });
  }

  app.get('/events/stream', (c) => {
    const query = parseQuery(c, StreamQuery);
    const lastId = lastEventId(c.req.header('last-event-id'));
    hub.ensureRoom(); // refuse with a problem document before the stream starts
    return streamSSE(c, async (stream) => {
      let queued = 0;
      let unsubscribe = () => {};
      let finish = () => {};
      const closed = new Promise<void>((resolve) => {
        finish = resolve;
        stream.onAbort(resolve);
      });
      const write = (text: string) => {
        if (++queued > (deps.maxQueuedWrites ?? MAX_QUEUED_WRITES)) {
          unsubscribe();
          finish();
          return;
        }
        void stream.write(text).finally(() => queued--);
      };
      write(': circuitlog event stream\n\n'); // sends the head at once, before any event
      const send = (t: LoggedTransition) => write(`event: transition\nid: ${t.id}\ndata: ${transitionData(t)}\n\n`);
      unsubscribe = hub.subscribe(query, lastId, send, () => finish());
      const heartbeat = setInterval(() => write(': heartbeat\n\n'), deps.heartbeatMs ?? HEARTBEAT_MS);
      try {
        await closed;
      } finally {
        clearInterval(heartbeat);
        unsubscribe();
      }
    });
  });
}
