import { AppError } from '../domain/errors.js';
import {
  matchesFilter,
  type LoggedTransition,
  type TransitionFilter,
  type TransitionReader,
} from '../store/transition-reader.js';

export interface EventHubOptions {
  readonly log: TransitionReader;
  /** Open streams in this process; one more is refused (config `events.max_streams`). */
  readonly maxStreams: number;
  /** How often the transitions table is read while a stream is open. */
  readonly pollMs?: number;
}

/** What a stream hands the hub: where its events go, and how full its buffer is. */
export interface StreamSink {
  readonly send: (t: LoggedTransition) => void;
  readonly close?: () => void;
  /** Is the stream's buffer past its low-water mark? A replay then waits for `drained`. */
  readonly backlogged?: () => boolean;
  /** Resolves once the buffer is below the mark again, or the stream is gone. */
  readonly drained?: () => Promise<void>;
}

/** One open stream: what it wants, and the newest id it was sent. */
interface Subscriber {
  readonly filter: TransitionFilter;
  lastId: number;
  readonly sink: StreamSink;
  /** Catching up from Last-Event-ID: the live tail leaves it alone until it is done. */
  replaying: boolean;
  gone: boolean;
}

const POLL_MS = 200; // 0.2 s: a transition by any worker reaches every stream well within 1 s
const PAGE = 1_000; // rows per read, so a long backlog never sits in memory at once

/**
 * Fans transitions out to the open event streams. The transitions table is the only
 * source: every worker tails it while it has streams open, so a transition committed by
 * any worker (or before a restart) reaches every stream, in id order, exactly once, and
 * a reconnecting client's Last-Event-ID replays from the same table.
 */
export class EventHub {
  private readonly subscribers = new Set<Subscriber>();
  private cursor = 0;
  private timer: NodeJS.Timeout | undefined;
  private nudged = false;
  private readonly replayQueue: (() => void)[] = [];
  private pumping = false;

  constructor(private readonly options: EventHubOptions) {}

  get size(): number {
    return this.subscribers.size;
  }

  /** Throws TOO_MANY_STREAMS when a new stream would pass the bound. */
  ensureRoom(): void {
    if (this.subscribers.size >= this.options.maxStreams) {
      throw new AppError('TOO_MANY_STREAMS', `This server already has ${this.options.maxStreams} open event streams.`, {
        retryAfterSeconds: 5,
      });
    }
  }

  /**
   * Start sending matching transitions to the sink: first every one after `lastEventId`
   * (a reconnect; in pages that wait for the stream to drain and yield to the event loop),
   * else only those from now on. Returns the unsubscribe function.
   */
  subscribe(filter: TransitionFilter, lastEventId: number | null, sink: StreamSink): () => void {
    this.ensureRoom();
    if (this.timer === undefined) {
      this.cursor = this.options.log.maxId();
      this.timer = setInterval(() => this.pollQuietly(), this.options.pollMs ?? POLL_MS);
      this.timer.unref();
    }
    const sub: Subscriber = {
      filter,
      lastId: lastEventId ?? this.options.log.maxId(),
      sink,
      replaying: lastEventId !== null,
      gone: false,
    };
    this.subscribers.add(sub);
    if (sub.replaying) {
      this.replay(sub).catch(() => {
        // A busy database: end the stream; the client resumes from the last id it got.
        if (!sub.gone) sub.sink.close?.();
      });
    }
    return () => {
      sub.gone = true;
      this.subscribers.delete(sub);
      if (this.subscribers.size === 0 && this.timer !== undefined) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** End every stream (server shutdown): clients reconnect with Last-Event-ID and lose nothing. */
  closeAll(): void {
    for (const sub of [...this.subscribers]) sub.sink.close?.();
  }

  /** A transition was just committed here: read the table now rather than at the next tick. */
  nudge(): void {
    if (this.timer === undefined || this.nudged) return;
    this.nudged = true;
    setImmediate(() => {
      this.nudged = false;
      this.pollQuietly();
    });
  }

  /** A busy database only delays delivery: the next tick reads from the same cursor. */
  private pollQuietly(): void {
    try {
      this.poll();
    } catch {
      // SQLITE_BUSY and the like; nothing was lost, the cursor did not move past unread rows
    }
  }

  /** Read what is new in the table and hand each row to the streams that want it. */
  poll(): void {
    if (this.subscribers.size === 0) return;
    for (;;) {
      const rows = this.options.log.after(this.cursor, PAGE);
      for (const t of rows) {
        this.cursor = t.id;
        for (const sub of this.subscribers) {
          if (!sub.replaying && t.id > sub.lastId && matchesFilter(t.circuit, sub.filter)) {
            sub.lastId = t.id;
            sub.sink.send(t);
          }
        }
      }
      if (rows.length < PAGE) return;
    }
  }

  /**
   * Everything after the stream's Last-Event-ID, a page at a time, yielding between pages
   * and pausing while the stream's buffer is full (then reading on from the last id sent):
   * 100,000 rows never block the loop or fill memory. A page shorter than PAGE that was
   * sent without a pause ends the replay in the same tick, so the live tail, which skips
   * this stream until then, takes over from exactly where it stops.
   */
  private async replay(sub: Subscriber): Promise<void> {
    for (;;) {
      await this.replayTurn();
      if (sub.gone) return;
      const rows = this.options.log.after(sub.lastId, PAGE, sub.filter);
      let paused = false;
      for (const t of rows) {
        if (sub.sink.backlogged?.()) {
          await (sub.sink.drained?.() ?? Promise.resolve());
          paused = true;
          break;
        }
        sub.lastId = t.id;
        sub.sink.send(t);
      }
      if (sub.gone) return;
      if (!paused && rows.length < PAGE) {
        sub.replaying = false;
        return;
      }
    }
  }

  /**
   * Wait for this replay's turn: one page of one replay per turn of the event loop, across
   * every replaying stream (20 streams replaying at once still read one page between two
   * rounds of I/O, not twenty).
   */
  private replayTurn(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.replayQueue.push(resolve);
      this.pumpReplays();
    });
  }

  private pumpReplays(): void {
    if (this.pumping || this.replayQueue.length === 0) return;
    this.pumping = true;
    setImmediate(() => {
      this.pumping = false;
      this.replayQueue.shift()!();
      this.pumpReplays();
    });
  }
}
