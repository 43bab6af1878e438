/**
 * nginx's `send_timeout` on the caller's side of the proxy (issue 27, item 7): a caller that
 * stops reading its answer is cut off after `send_timeout_ms` without taking any of the bytes
 * waiting for it, so it cannot hold a concurrency slot or a node's connection forever.
 * https://nginx.org/en/docs/http/ngx_http_core_module.html#send_timeout
 */
import type { ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Upstream } from './upstreams.js';

/** What the watch reads of the caller's stream: a Node `ServerResponse` or a socket. */
export interface WatchedStream {
  /** Bytes written but not yet handed to the kernel (a `ServerResponse` counts its socket's too). */
  readonly writableLength: number;
  readonly destroyed: boolean;
}

function check(watch: SendWatch): void {
  watch.expired();
}

/**
 * Times a caller while bytes wait for it. `stalled()` starts the clock (a write was not
 * taken at once, or the end waits to be flushed); `settled()` stops it ('drain'), and so does
 * a window's end that finds nothing waiting or the stream gone.
 * When `timeoutMs` passes, the bytes still waiting are compared with those waiting when the
 * window began: fewer means the caller took some (Node hands a chunk, up to 64 KiB, to the
 * kernel at a time) and a new window starts; as many means it took nothing and `onTimeout`
 * runs, once. One timer per watch, refreshed rather than re-created.
 */
export class SendWatch {
  private timer: NodeJS.Timeout | null = null;
  private waiting = 0;
  private fired = false;

  constructor(
    private readonly stream: WatchedStream,
    private readonly timeoutMs: number,
    private readonly onTimeout: () => void,
  ) {}

  /** Bytes wait for the caller: the clock runs (if it does not already). */
  stalled(): void {
    if (this.fired || this.timer !== null) return;
    this.waiting = this.stream.writableLength;
    this.timer = setTimeout(check, this.timeoutMs, this);
  }

  /** The caller took everything waiting ('drain', 'finish'), or the stream is gone: the clock stops. */
  settled(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  /** The end of a window (the timer's callback). */
  expired(): void {
    const waiting = this.stream.writableLength;
    if (waiting === 0 || this.stream.destroyed) {
      this.settled(); // all taken, or the caller left
      return;
    }
    if (waiting < this.waiting) {
      this.waiting = waiting;
      this.timer?.refresh();
      return;
    }
    this.timer = null;
    this.fired = true;
    this.onTimeout();
  }
}

const SLICE_BYTES = 64 * 1024; // 64 KiB: the caller's progress is seen a slice at a time

/**
 * Send a complete body (a fallback, a coalesced copy) after its head, in 64 KiB slices with
 * backpressure, under `send_timeout_ms`: one `end(body)` would hand Node the whole body as
 * one write, and a caller slowly reading a large one would show no progress until its last
 * byte. A caller that takes nothing for `send_timeout_ms` is cut off and counted. Such an
 * answer holds no slot and no node connection, only its bytes and the caller's socket.
 */
export function sendWhole(outgoing: ServerResponse, body: Buffer | null, upstream: Upstream): void {
  const watch = new SendWatch(outgoing, upstream.config.send_timeout_ms, () => {
    upstream.sendTimedOut();
    cutOff(outgoing);
  });
  const whole = body ?? Buffer.alloc(0);
  let offset = 0;
  const pump = (): void => {
    watch.settled();
    while (!outgoing.destroyed) {
      const slice = whole.subarray(offset, offset + SLICE_BYTES);
      offset += slice.length;
      if (offset >= whole.length) {
        outgoing.end(slice.length > 0 ? slice : undefined);
        if (outgoing.writableLength > 0) watch.stalled(); // the last bytes still wait for the caller
        return;
      }
      if (!outgoing.write(slice)) {
        outgoing.once('drain', pump);
        watch.stalled();
        return;
      }
    }
  };
  pump();
}

/**
 * End a timed-out caller's connection with a reset, as nginx's `reset_timedout_connection`
 * does: a plain close would leave the unread bytes in the kernel, still offered to a peer
 * that does not read, for minutes. 'close' follows on the response and the socket.
 */
export function cutOff(stream: ServerResponse | Duplex): void {
  const socket = 'socket' in stream ? stream.socket : stream;
  if (socket instanceof Socket && !socket.destroyed && !socket.connecting) socket.resetAndDestroy();
  stream.destroy();
}
