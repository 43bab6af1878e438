import { insufficientScope } from '../auth/refusal.js';
import type { ServerResponse } from 'node:http';
import { circuitPermitted, hasScope, type Identity } from '../auth/identity.js';
import { identityOf } from '../auth/request-identity.js';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context, Hono } from 'hono';
import { z } from 'zod';
import { CIRCUIT_NAME_MAX_LENGTH } from '../config.js';
import { AppError } from '../domain/errors.js';
import type { LoggedTransition, TransitionReader } from '../store/transition-reader.js';
import type { Logger } from 'pino';
import type { EventHub, StreamSink as HubSink } from './event-hub.js';
import { HEARTBEAT_FRAME, HELLO_FRAME, transitionFrame } from './event-frames.js';
import { SocketSink } from './socket-sink.js';
import { openStreamSink, type StreamSink, type WebStreamSink } from './stream-sink.js';
import { cursorStart, type StreamStart } from './stream-resume.js';
import type { Metrics } from './metrics.js';

export const HEARTBEAT_MS = 15_000; // 15 s: a comment line keeps proxies from closing an idle stream
/**
 * Bytes one stream may hold unsent (config `events.max_stream_buffer_bytes`): past this the
 * client is not keeping up and the stream is destroyed; it resumes with Last-Event-ID.
 * 1 MiB, as Envoy's per-connection buffer limit.
 */
export const MAX_STREAM_BUFFER_BYTES = 1024 * 1024;

const StreamQuery = z
  .object({
    circuit: z.string().min(1).max(CIRCUIT_NAME_MAX_LENGTH).optional(),
    prefix: z.string().min(1).max(CIRCUIT_NAME_MAX_LENGTH).optional(),
    /** `true`: the audit log's entries too, as `event: audit` (scope `admin`); a reader that did not ask gets none. */
    audit: z.enum(['true', 'false']).optional(),
  })
  .strict()
  .refine((q) => q.circuit === undefined || q.prefix === undefined, {
    message: 'use circuit or prefix, not both',
    path: ['prefix'],
  });

/** `Last-Event-ID` as a transition id, null when absent; anything else is a 400. */
function lastEventId(header: string | undefined): number | null {
  if (header === undefined || header === '') return null;
  if (!/^\d{1,15}$/.test(header))
    throw new AppError('INVALID_HEADER', 'Last-Event-ID must be the numeric id of an event this server sent.');
  return Number(header);
}

/** The query of /events/stream, or a 400 naming each field (an unknown one by its name). */
function streamQuery(c: Context): z.output<typeof StreamQuery> {
  const result = StreamQuery.safeParse(c.req.query());
  if (result.success) return result.data;
  const fields = result.error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys'
      ? issue.keys.map((key) => ({ field: key, message: `unknown query parameter; use circuit, prefix or audit` }))
      : [{ field: issue.path.map(String).join('.') || '(query)', message: issue.message }],
  );
  throw new AppError('INVALID_QUERY', 'The query string has invalid parameters.', { fields });
}

export interface ObserveRouteDeps {
  readonly metrics?: Metrics;
  readonly hub: EventHub;
  readonly transitions: TransitionReader;
  readonly heartbeatMs?: number;
  readonly maxStreamBufferBytes?: number;
  readonly logger?: Logger;
}

/** `GET /metrics` (when metrics are on) and `GET /events/stream`. */
export function registerObserveRoutes<E extends object>(app: Hono<E>, deps: ObserveRouteDeps): void {
  const { metrics } = deps;
  if (metrics) {
    app.get('/metrics', async (c) => {
      let text: string;
      try {
        text = await metrics.render();
      } catch (error) {
        throw error instanceof AppError
          ? error
          : new AppError('STORAGE_BUSY', 'Metrics could not be gathered; try again shortly.', {
              retryAfterSeconds: 1,
              cause: error,
            });
      }
      return c.body(text, 200, { 'content-type': metrics.contentType });
    });
  }
  registerStreamRoute(app, deps);
}

// x-accel-buffering: nginx in front passes events on at once instead of buffering them.
const STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
} as const;

/**
 * What the hub sends one stream: a transition's shared frame under the id this stream names it
 * by, into its sink. A class, so thousands of open streams share its methods.
 */
class StreamFeed implements HubSink {
  constructor(
    private readonly sink: StreamSink,
    private readonly idOf: StreamStart['idOf'],
    /** A credential limited to `circuits` patterns gets only their transitions (issue 30); null: all. */
    private readonly permitted: ((name: string) => boolean) | null = null,
    /** Audit events go only to a stream that asked for them (`?audit=true`, scope `admin`). */
    private readonly audits = true,
  ) {}
  send(t: LoggedTransition): void {
    if (this.permitted !== null && !this.permitted(t.circuit)) return;
    const id = this.idOf(t);
    if (id !== null) this.sink.write(transitionFrame(t, id));
  }
  close(): void {
    this.sink.end();
  }
  backlogged(): boolean {
    return this.sink.backlogged();
  }
  drained(): Promise<void> {
    return this.sink.drained();
  }
  sendFrame(circuit: string | null, frame: Buffer): void {
    if (!this.audits || (circuit !== null && this.permitted !== null && !this.permitted(circuit))) return;
    this.sink.write(frame);
  }
}

const beat = (sink: StreamSink) => sink.write(HEARTBEAT_FRAME);

/**
 * Served by Node, the stream is written to the Node response directly (the route answers
 * `RESPONSE_ALREADY_SENT`); under `app.request()` it is a web stream body.
 */
function registerStreamRoute<E extends object>(app: Hono<E>, deps: ObserveRouteDeps): void {
  const { hub } = deps;
  const maxBytes = deps.maxStreamBufferBytes ?? MAX_STREAM_BUFFER_BYTES;
  const onCutOff = (buffered: number) =>
    deps.logger?.warn(
      { event: 'stream_cut_off', buffered_bytes: buffered, max_stream_buffer_bytes: maxBytes },
      'event stream client too slow; stream destroyed',
    );
  app.get('/events/stream', async (c) => {
    const { audit, ...query } = streamQuery(c);
    const identity = identityOf(c);
    // The audit log's entries only when asked for, and only for a credential that may read the log.
    if (audit === 'true' && !hasScope(identity, 'admin'))
      throw insufficientScope('admin', 'GET', '/events/stream?audit=true');
    const start = await streamStart(deps, c.req.header('last-event-id'));
    hub.ensureRoom(); // refuse with a problem document before the stream starts
    const { reset } = start;
    const from = reset === null ? start.lastId : typeof reset.newest_id === 'number' ? reset.newest_id : null;
    const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    const sink: StreamSink | WebStreamSink =
      outgoing === undefined
        ? openStreamSink(maxBytes, onCutOff)
        : new SocketSink(outgoing, STREAM_HEADERS, maxBytes, onCutOff);
    let unsubscribe: () => void;
    try {
      unsubscribe = storageRead(() =>
        hub.subscribe(query, from, new StreamFeed(sink, start.idOf, permittedCircuits(identity), audit === 'true')),
      );
    } catch (error) {
      sink.end(); // nothing was written: the error handler answers
      throw error;
    }
    // The hub sends nothing in this tick: these lead the stream, the head with them at once.
    sink.write(HELLO_FRAME);
    if (reset !== null) sink.write(`event: reset\nid: ${reset.newest_id}\ndata: ${JSON.stringify(reset)}\n\n`);
    const heartbeat = setInterval(beat, deps.heartbeatMs ?? HEARTBEAT_MS, sink);
    void sink.closed.then(() => {
      clearInterval(heartbeat);
      unsubscribe();
    });
    return 'readable' in sink ? c.body(sink.readable, 200, STREAM_HEADERS) : RESPONSE_ALREADY_SENT;
  });
}

/** The circuits an identity may see, as a test; null: every circuit. */
function permittedCircuits(identity: Identity): ((name: string) => boolean) | null {
  return identity.circuits === null ? null : (name) => circuitPermitted(identity, name);
}

/** SQLite: an event's id is its row id. */
const rowId = (t: LoggedTransition): string => String(t.id);

/** Where the stream starts: a cursor (Redis: `stream-resume.ts`), or a row id (SQLite). */
async function streamStart(deps: ObserveRouteDeps, header: string | undefined): Promise<StreamStart> {
  const cursors = await cursorStart(deps.transitions, header);
  if (cursors !== null) return cursors;
  const lastId = lastEventId(header);
  return { lastId, reset: storageRead(() => resetFor(deps.transitions, lastId)), idOf: rowId };
}

/** A read of the transitions log; a busy or failing store is a 503 to retry, not a 500. */
function storageRead<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof AppError) throw error;
    throw new AppError('STORAGE_BUSY', 'The transitions log could not be read; try again shortly.', {
      retryAfterSeconds: 1,
      cause: error,
    });
  }
}

/**
 * A Last-Event-ID this log cannot resume from: above the newest id (another server, a
 * reset store), or older than the oldest row kept minus one (rows deleted since). The
 * client then gets `event: reset` and the stream goes on live from the newest id.
 */
export function resetFor(
  log: TransitionReader,
  lastId: number | null,
): { reason: 'unknown-event-id' | 'expired'; newest_id: number } | null {
  if (lastId === null) return null;
  const newest = log.maxId();
  if (lastId > newest) return { reason: 'unknown-event-id', newest_id: newest };
  const oldest = log.after(0, 1)[0]?.id;
  if (oldest !== undefined && lastId < oldest - 1) return { reason: 'expired', newest_id: newest };
  return null;
}
