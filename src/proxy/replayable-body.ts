import { Readable } from 'node:stream';

/** Who the upload waits on; the attempt's timer runs only while it waits on the node. */
export interface UploadWatcher {
  /** We wait for the caller's next bytes: not the node's time. */
  callerTurn(): void;
  /** The node holds us up (connecting, or not reading what we send): the node's time. */
  nodeTurn(): void;
  /** The caller's body is complete: from now on every wait is the node's. */
  bodyEnded(): void;
}

const BODY_TIMEOUT = Object.assign(new Error('the caller stopped sending its request body'), {
  code: 'CIRCUITLOG_REQUEST_BODY_TIMEOUT',
});

/**
 * A streamed request body that can be sent again to another node. Bytes pass through
 * as they arrive; up to `maxBufferBytes` of them are kept so a retry can resend them
 * before reading on. A body never read at all (connection refused) is always replayable.
 *
 * It also tells whose turn it is (`watcher`): while it waits on the caller, a silence of
 * `idleTimeoutMs` ends the upload (`timedOut`, nginx's `client_body_timeout`), and the
 * node's attempt timer is paused, so a slow caller never counts against a node (Envoy
 * times the upstream from the end of the downstream request, too).
 */
export class ReplayableBody {
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private overflowed = false;
  private ended = false;
  private discarded = false;
  private current: Readable | null = null;
  private callerTurn = false;
  private idle: NodeJS.Timeout | null = null;
  /** The caller's side failed (client went away mid-upload, or fell silent); not the node's fault. */
  sourceError: Error | null = null;
  /** The caller fell silent for `idleTimeoutMs` mid-body. */
  timedOut = false;
  /** The attempt in progress, told whose turn it is. */
  watcher: UploadWatcher | null = null;

  constructor(
    private readonly source: Readable,
    private readonly maxBufferBytes: number,
    private readonly idleTimeoutMs: number,
  ) {
    source.pause();
    source.on('data', (chunk: Buffer) => {
      this.idle?.refresh();
      if (!this.overflowed) {
        this.keptBytes += chunk.length;
        if (this.keptBytes > this.maxBufferBytes) {
          this.overflowed = true;
          this.kept = [];
        } else {
          this.kept.push(chunk);
        }
      }
      if (this.current === null || !this.current.push(chunk)) this.pauseSource();
    });
    source.on('end', () => {
      this.ended = true;
      this.turn(false);
      this.watcher?.bodyEnded();
      this.current?.push(null);
    });
    source.on('error', (error) => {
      this.sourceError ??= error;
      this.turn(false);
      this.current?.destroy(error);
    });
  }

  /** Whether a new attempt could send the whole body. */
  get replayable(): boolean {
    return !this.overflowed && this.sourceError === null;
  }

  /** A fresh stream for one attempt: the kept bytes, then the rest of the source. */
  attempt(): Readable {
    this.current?.destroy();
    const replay = this.kept.slice();
    const out: Readable = new Readable({
      read: () => {
        while (replay.length > 0) {
          if (!out.push(replay.shift())) return;
        }
        if (this.ended) out.push(null);
        else {
          this.turn(true);
          this.source.resume();
        }
      },
      destroy: (error, callback) => {
        // Undici destroys the body of a failed request; the source stays for the next attempt.
        if (this.current === out) {
          this.current = null;
          this.pauseSource();
        }
        callback(error);
      },
    });
    this.current = out;
    return out;
  }

  /** Stop reading the caller's body (nothing more will be sent). */
  discard(): void {
    this.turn(false);
    this.discarded = true;
    this.overflowed = true;
    this.kept = [];
    this.current?.destroy();
    this.source.resume(); // let Node drain what the caller still sends
  }

  private pauseSource(): void {
    this.source.pause();
    this.turn(false);
  }

  /** Whose turn it is: the caller's (its idle timer runs) or the node's (the attempt's timer runs). */
  private turn(caller: boolean): void {
    if (caller === this.callerTurn || (caller && (this.ended || this.discarded || this.sourceError !== null))) return;
    this.callerTurn = caller;
    if (caller) {
      this.idle = setTimeout(() => this.timeOut(), this.idleTimeoutMs);
      this.watcher?.callerTurn();
    } else {
      if (this.idle !== null) clearTimeout(this.idle);
      this.idle = null;
      if (!this.ended && this.sourceError === null) this.watcher?.nodeTurn();
    }
  }

  private timeOut(): void {
    this.idle = null;
    this.timedOut = true;
    this.sourceError ??= BODY_TIMEOUT;
    this.callerTurn = false;
    this.current?.destroy(BODY_TIMEOUT);
  }
}
