import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { StreamSink } from './stream-sink.js';

const RECHECK_MS = 10; // a replay paused under Node's own high-water mark looks again this often

/**
 * An event stream written straight to Node's response: no web stream, no copy, no encoding per
 * stream (a transition's bytes are made once and shared: event-frames.ts). What Node holds
 * unsent for this stream (`writableLength`: the response's queue and its socket's) never
 * passes `maxBytes`, as nginx and Envoy bound a slow client's buffers: a write that would
 * pass it destroys the connection and drops the queue at once, so a client that stopped
 * reading costs nothing from then on; it reconnects with Last-Event-ID and misses nothing.
 *
 * The head (`200`, `headers`) goes with the first write; `end()` before any write sends
 * nothing, so a route that fails after opening the sink can still answer with a problem.
 */
export function openSocketSink(
  outgoing: ServerResponse,
  headers: OutgoingHttpHeaders,
  maxBytes: number,
  onCutOff: (bufferedBytes: number) => void,
): StreamSink {
  let done = false;
  let finish!: () => void;
  const closed = new Promise<void>((resolve) => (finish = resolve));
  const stop = (): void => {
    if (done) return;
    done = true;
    finish();
  };
  outgoing.once('close', stop); // the client went away, the stream was cut off, or it ended
  const backlogged = () => outgoing.writableNeedDrain || outgoing.writableLength > maxBytes / 2;
  return {
    closed,
    backlogged,
    write(text) {
      if (done) return;
      const chunk = typeof text === 'string' ? Buffer.from(text) : text;
      const total = outgoing.writableLength + chunk.byteLength;
      if (total > maxBytes) {
        stop();
        onCutOff(total);
        outgoing.destroy();
        return;
      }
      if (!outgoing.headersSent) {
        outgoing.writeHead(200, headers);
        outgoing.flushHeaders();
        outgoing.write(chunk);
        return;
      }
      // Corked, a chunk leaves as one writev (size line, bytes, CRLF), not three socket writes.
      outgoing.cork();
      outgoing.write(chunk);
      outgoing.uncork();
    },
    drained() {
      if (done || !backlogged()) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          outgoing.off('drain', wake);
          outgoing.off('close', wake);
          resolve();
        };
        outgoing.once('drain', wake);
        outgoing.once('close', wake);
        // Past half of a small bound but under Node's mark, no 'drain' comes: look again soon.
        const timer = outgoing.writableNeedDrain ? undefined : setTimeout(wake, RECHECK_MS);
      });
    },
    end() {
      if (done) return;
      const started = outgoing.headersSent;
      stop();
      if (started) outgoing.end();
    },
  };
}
