import type { ServerResponse } from 'node:http';

/** The body of one event stream, with its unsent bytes bounded. */
export interface StreamSink {
  /** The response body. */
  readonly readable: ReadableStream<Uint8Array>;
  /** Queue text (or bytes shared by many streams: never changed); past the bound the stream is destroyed instead. */
  write(text: string | Uint8Array): void;
  /** More than half the bound is unsent: a replay waits for `drained` before sending on. */
  backlogged(): boolean;
  /** Resolves once at most half the bound is unsent, or the stream has ended. */
  drained(): Promise<void>;
  /** End normally: what is queued is still sent (server shutdown). */
  end(): void;
  /** Resolves when the stream ends, however it ends (the client leaving included). */
  readonly closed: Promise<void>;
}

const encoder = new TextEncoder();

/**
 * The socket goes, with whatever Node held for it; its 'close' makes @hono/node-server
 * cancel this body, which drops the queue. Without a socket (app.request), error it.
 */
function cutOff(outgoing: ServerResponse | undefined, controller: ReadableStreamDefaultController<Uint8Array>): void {
  if (outgoing !== undefined) outgoing.destroy();
  else controller.error(new Error('event stream client too slow'));
}

/**
 * A response body whose queue is measured in bytes, as nginx and Envoy bound a slow
 * client's buffers: what this stream queues never passes `maxBytes`. A write that would pass it destroys the connection and
 * drops the queue at once, so a client that stopped reading costs nothing from then on;
 * it reconnects with Last-Event-ID and misses nothing.
 */
export function openStreamSink(
  outgoing: ServerResponse | undefined,
  maxBytes: number,
  onCutOff: (bufferedBytes: number) => void,
): StreamSink {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let done = false;
  let finish!: () => void;
  const closed = new Promise<void>((resolve) => (finish = resolve));
  const waiters: (() => void)[] = [];
  const readable = new ReadableStream<Uint8Array>(
    {
      start: (c) => {
        controller = c;
      },
      pull: () => wake(), // the response took a chunk: a waiting replay may go on
      cancel: () => stop(), // the client went away (@hono/node-server cancels on 'close')
    },
    new ByteLengthQueuingStrategy({ highWaterMark: maxBytes }),
  );
  // Our queue only: @hono/node-server stops reading it while the socket is full, so what Node
  // holds for the socket stays under its own high-water mark (16 KiB) plus one chunk.
  const buffered = () => maxBytes - (controller.desiredSize ?? 0);
  const backlogged = () => buffered() > maxBytes / 2;
  function wake(): void {
    if (done || !backlogged()) for (const resolve of waiters.splice(0)) resolve();
  }
  function stop(): void {
    if (done) return;
    done = true;
    finish();
    wake();
  }
  return {
    readable,
    closed,
    backlogged,
    write(text) {
      if (done) return;
      const chunk = typeof text === 'string' ? encoder.encode(text) : text;
      const total = buffered() + chunk.byteLength;
      if (total <= maxBytes) {
        controller.enqueue(chunk);
        return;
      }
      stop();
      onCutOff(total);
      cutOff(outgoing, controller);
    },
    drained() {
      if (done || !backlogged()) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push(resolve));
    },
    end() {
      if (done) return;
      stop();
      controller.close();
    },
  };
}
