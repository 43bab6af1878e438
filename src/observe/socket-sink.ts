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
 * A class, not closures: thousands are open at once, and methods cost nothing per stream.
 */
export class SocketSink implements StreamSink {
  readonly closed: Promise<void>;
  private done = false;
  private finish!: () => void;

  constructor(
    private readonly outgoing: ServerResponse,
    private readonly headers: OutgoingHttpHeaders,
    private readonly maxBytes: number,
    private readonly onCutOff: (bufferedBytes: number) => void,
  ) {
    this.closed = new Promise<void>((resolve) => (this.finish = resolve));
    outgoing.once('close', () => this.stop()); // the client went away, the stream was cut off, or it ended
  }

  backlogged(): boolean {
    return this.outgoing.writableNeedDrain || this.outgoing.writableLength > this.maxBytes / 2;
  }

  write(text: string | Uint8Array): void {
    if (this.done) return;
    const { outgoing } = this;
    const chunk = typeof text === 'string' ? Buffer.from(text) : text;
    const total = outgoing.writableLength + chunk.byteLength;
    if (total > this.maxBytes) {
      this.stop();
      this.onCutOff(total);
      outgoing.destroy();
      return;
    }
    if (!outgoing.headersSent) {
      outgoing.writeHead(200, this.headers);
      outgoing.flushHeaders(); // sent on its own, the head is one flat string, not a rope kept per stream
      outgoing.write(chunk);
      return;
    }
    // Corked, a chunk leaves as one writev (size line, bytes, CRLF), not as three socket writes.
    outgoing.cork();
    outgoing.write(chunk);
    outgoing.uncork();
  }

  drained(): Promise<void> {
    if (this.done || !this.backlogged()) return Promise.resolve();
    const { outgoing } = this;
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
  }

  end(): void {
    if (this.done) return;
    const started = this.outgoing.headersSent;
    this.stop();
    if (started) this.outgoing.end();
  }

  private stop(): void {
    if (this.done) return;
    this.done = true;
    this.finish();
  }
}
