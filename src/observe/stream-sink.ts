/** The body of one event stream, with its unsent bytes bounded. */
export interface StreamSink {
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

/** A stream sink that is a web `ReadableStream`: the body of a response under `app.request()`. */
export interface WebStreamSink extends StreamSink {
  /** The response body. */
  readonly readable: ReadableStream<Uint8Array>;
}

const encoder = new TextEncoder();

/**
 * A response body whose queue is measured in bytes, as nginx and Envoy bound a slow
 * client's buffers: what this stream queues never passes `maxBytes`. A write that would pass
 * it errors the body and drops the queue at once. Used where there is no Node response to
 * write to (`app.request()`); a served stream uses `openSocketSink` (socket-sink.ts).
 */
export function openStreamSink(maxBytes: number, onCutOff: (bufferedBytes: number) => void): WebStreamSink {
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
      pull: () => wake(), // the reader took a chunk: a waiting replay may go on
      cancel: () => stop(), // the reader went away
    },
    new ByteLengthQueuingStrategy({ highWaterMark: maxBytes }),
  );
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
      controller.error(new Error('event stream client too slow'));
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
