import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { BodySink } from './attempt.js';
import type { Flight } from './coalesce.js';
import type { ProxyCall } from './proxy-call.js';
import { NOBODY_READS } from './proxy-errors.js';
import { cutOff, SendWatch } from './send-timeout.js';
import type { StaleCapture } from './stale-cache.js';
import type { ProxyNode } from './upstreams.js';

/** Body errors raised by undici for the node's side: reset or closed socket, body timeout, short body, bad framing. */
const NODE_BODY_ERRORS = new Set([
  'UND_ERR_SOCKET',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'ECONNRESET',
]);

function isNodeBodyError(error: { code?: string }): boolean {
  return error.code !== undefined && (NODE_BODY_ERRORS.has(error.code) || error.code.startsWith('HPE_')); // HPE_*: llhttp parse errors
}

/** Where a forwarded body goes: the caller's Node response (or a web stream), then the verdict. */
export class ForwardSink implements BodySink {
  outgoing: ServerResponse | null = null;
  web: Readable | null = null;
  private resumeFn: (() => void) | null = null;
  private over = false;
  /** `send_timeout_ms` on the caller's Node response (the web path has no socket to cut). */
  private watch: SendWatch | null = null;

  constructor(
    private readonly logger: Logger,
    private readonly call: ProxyCall,
    private readonly node: ProxyNode,
    private readonly judge: boolean,
    private readonly keep: StaleCapture | null,
    private readonly flight: Flight | null,
    /** When the attempt was dispatched: its outcome's duration runs to the end of the body. */
    private readonly startedAt: number,
  ) {}

  /** The body goes to the caller's Node response, which `send_timeout_ms` watches. */
  sendTo(outgoing: ServerResponse): void {
    this.outgoing = outgoing;
  }

  /** Bytes wait for the caller: `send_timeout_ms` runs (the watch is made on the first stall only: most answers never stall). */
  private stalled(outgoing: ServerResponse): void {
    if (this.watch === null) {
      this.watch = new SendWatch(outgoing, this.call.parts.upstream.config.send_timeout_ms, () => this.sendTimedOut());
      outgoing.once('close', () => this.callerClosed()); // after ProxyCall's own 'close' listener
    }
    this.watch.stalled();
  }

  /**
   * A stalled caller's connection closed (it left, or was cut off). A leader that followers
   * still wait on is detached by now and reads on for them: the node's body, paused for the
   * leader, is resumed (no 'drain' comes from a closed response).
   */
  private callerClosed(): void {
    this.watch?.settled();
    if (this.call.detached) this.resume();
  }

  write(chunk: Buffer, resume: () => void): boolean {
    this.keep?.chunk(chunk);
    this.flight?.chunk(chunk);
    if (this.call.detached) {
      // Read on for the followers only; once they no longer wait on this body, stop it.
      if (this.flight === null || this.flight.settled) this.call.cancel(NOBODY_READS);
      return true;
    }
    const ok = this.outgoing !== null ? this.outgoing.write(chunk) : this.web === null || this.web.push(chunk);
    if (!ok) {
      this.resumeFn = resume;
      if (this.outgoing !== null) {
        this.outgoing.once('drain', () => this.drained());
        this.stalled(this.outgoing);
      }
    }
    return ok;
  }

  /** The caller took everything waiting: the clock stops and the node is read again. */
  private drained(): void {
    this.watch?.settled();
    this.resume();
  }

  resume(): void {
    const resume = this.resumeFn;
    this.resumeFn = null;
    resume?.();
  }

  end(): void {
    this.keep?.end();
    this.flight?.end();
    if (this.call.detached) this.outgoing?.destroy();
    else if (this.outgoing !== null) this.endOutgoing(this.outgoing);
    else this.web?.push(null);
    this.close(true);
  }

  /** The node's body is over: the slot goes back now, and the watch stays on until the caller has taken the rest. */
  private endOutgoing(outgoing: ServerResponse): void {
    outgoing.end();
    if (outgoing.writableLength === 0) this.watch?.settled();
    else this.stalled(outgoing);
  }

  /**
   * The caller took nothing for `send_timeout_ms`: its connection is cut ('close' cancels the
   * node's body and frees the slot, as a hang-up does: nothing is counted against the node;
   * a leader with followers waiting reads on for them, `callerClosed`).
   */
  private sendTimedOut(): void {
    this.call.parts.upstream.sendTimedOut();
    if (this.outgoing !== null) cutOff(this.outgoing);
  }

  fail(error: Error & { code?: string }): void {
    const nodeFault = !this.call.done && isNodeBodyError(error);
    if (nodeFault) {
      this.logger.warn(
        {
          event: 'upstream_failed',
          upstream: this.call.parts.upstream.name,
          node: this.node.id,
          kind: 'body',
          err: error.message,
        },
        `${this.node.circuit}: body failed`,
      );
    }
    this.flight?.release(); // a cut body is no answer to share: the followers call themselves
    this.watch?.settled();
    if (this.outgoing !== null) this.outgoing.destroy();
    else this.web?.destroy(error);
    this.close(!nodeFault);
  }

  private close(success: boolean): void {
    if (this.over) return;
    this.over = true;
    this.call.end();
    if (this.judge) this.call.record(this.node, success, this.startedAt);
  }
}
