import { Readable } from 'node:stream';

/**
 * A streamed request body that can be sent again to another node. Bytes pass through
 * as they arrive; up to `maxBufferBytes` of them are kept so a retry can resend them
 * before reading on. A body never read at all (connection refused) is always replayable.
 */
export class ReplayableBody {
  private kept: Buffer[] = [];
  private keptBytes = 0;
  private overflowed = false;
  private ended = false;
  private current: Readable | null = null;
  /** The caller's side failed (client went away mid-upload); not the node's fault. */
  sourceError: Error | null = null;

  constructor(
    private readonly source: Readable,
    private readonly maxBufferBytes: number,
  ) {
    source.pause();
    source.on('data', (chunk: Buffer) => {
      if (!this.overflowed) {
        this.keptBytes += chunk.length;
        if (this.keptBytes > this.maxBufferBytes) {
          this.overflowed = true;
          this.kept = [];
        } else {
          this.kept.push(chunk);
        }
      }
      if (this.current === null || !this.current.push(chunk)) source.pause();
    });
    source.on('end', () => {
      this.ended = true;
      this.current?.push(null);
    });
    source.on('error', (error) => {
      this.sourceError = error;
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
        else this.source.resume();
      },
      destroy: (error, callback) => {
        // Undici destroys the body of a failed request; the source stays for the next attempt.
        if (this.current === out) {
          this.current = null;
          this.source.pause();
        }
        callback(error);
      },
    });
    this.current = out;
    return out;
  }

  /** Stop reading the caller's body (nothing more will be sent). */
  discard(): void {
    this.overflowed = true;
    this.kept = [];
    this.current?.destroy();
    this.source.resume(); // let Node drain what the caller still sends
  }
}
