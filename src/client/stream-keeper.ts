/**
 * Keeps `/events/stream` open: reconnects at once after a drop, then with exponential
 * backoff (capped at `maxDelayMs`, 5 s by default) while circuitlog cannot be reached, and
 * always resumes with `Last-Event-ID`, so no transition is missed across a reconnect or a
 * server restart.
 */

import {
  TransportError,
  type OpenStream,
  type StreamReset,
  type Transport,
  type TransitionEvent,
} from './transport.js';

export interface StreamHooks {
  onOpen(): void;
  onEvent(event: TransitionEvent): void;
  /** circuitlog did not know where to resume (`event: reset`): events may have been missed. */
  onReset(reset: StreamReset): void;
  /** The stream ended or could not be opened. */
  onDown(error: TransportError | null): void;
}

/** Exponential backoff with jitter: 100 ms, 200 ms, ... capped at `maxDelayMs`. */
export function backoffDelay(attempt: number, maxDelayMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxDelayMs, 100 * 2 ** Math.min(attempt, 16));
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

const MIN_HEALTHY_STREAM_MS = 1_000; // 1 s

export class StreamKeeper {
  private lastId: string | undefined;
  private current: OpenStream | null = null;
  private stopped = false;
  private wake: (() => void) | null = null;

  constructor(
    private readonly transport: Transport,
    private readonly hooks: StreamHooks,
    private readonly maxDelayMs: number,
  ) {}

  get lastEventId(): string | undefined {
    return this.lastId;
  }

  start(): void {
    void this.run();
  }

  /** Skip the current backoff wait (for example when another request just succeeded). */
  retryNow(): void {
    this.wake?.();
  }

  stop(): void {
    this.stopped = true;
    this.current?.close();
    this.wake?.();
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.stopped) {
      try {
        this.current = await this.transport.openStream(
          this.lastId,
          (event) => {
            this.lastId = event.id;
            this.hooks.onEvent(event);
          },
          (reset) => {
            this.lastId = reset.newestId; // a reconnect resumes from here, not from the unknown id
            this.hooks.onReset(reset);
          },
        );
        if (this.stopped) break;
        const openedAt = Date.now();
        this.hooks.onOpen();
        await this.current.ended;
        this.current = null;
        if (this.stopped) break;
        this.hooks.onDown(null);
        // After a drop, try again at once, unless the stream keeps ending as soon as it opens.
        if (Date.now() - openedAt >= MIN_HEALTHY_STREAM_MS) {
          attempt = 0;
          continue;
        }
      } catch (error) {
        if (this.stopped) break;
        this.hooks.onDown(error instanceof TransportError ? error : new TransportError('unreachable', String(error)));
      }
      await this.sleep(backoffDelay(attempt++, this.maxDelayMs));
    }
    this.current?.close();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.wake = null;
        resolve();
      }
      this.wake = done;
    });
  }
}
