import { AppError } from '../domain/errors.js';
import { matchesFilter, type LoggedTransition, type TransitionFilter, type TransitionReader } from '../store/transition-log.js';

export interface EventHubOptions {
  readonly log: TransitionReader;
  /** Open streams in this process; one more is refused (config `events.max_streams`). */
  readonly maxStreams: number;
  /** How often the transitions table is read while a stream is open. */
  readonly pollMs?: number;
}

/** One open stream: what it wants, and the newest id it was sent. */
interface Subscriber {
  readonly filter: TransitionFilter;
  lastId: number;
  readonly send: (t: LoggedTransition) => void;
  readonly close: () => void;
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

  constructor(private readonly options: EventHubOptions) {}

  get size(): number {
    return this.subscribers.size;
  }

  /** Throws TOO_MANY_STREAMS when a new stream would pass the bound. */
  ensureRoom(): void {
    if (this.subscribers.size >= this.options.maxStreams) {
      throw new AppError('TOO_MANY_STREAMS', `This server already has ${this.options.maxStreams} open event streams.`, { retryAfterSeconds: 5 });
    }
  }

  /**
   * Start sending matching transitions to `send`: first every one after `lastEventId`
   * (a reconnect), else only those from now on. Returns the unsubscribe function.
   */
  subscribe(filter: TransitionFilter, lastEventId: number | null, send: (t: LoggedTransition) => void, close: () => void = () => {}): () => void {
    this.ensureRoom();
    if (this.timer === undefined) {
      this.cursor = this.options.log.maxId();
      this.timer = setInterval(() => this.pollQuietly(), this.options.pollMs ?? POLL_MS);
      this.timer.unref();
    }
    const sub: Subscriber = { filter, lastId: lastEventId ?? this.options.log.maxId(), send, close };
    if (lastEventId !== null) this.replay(sub);
    this.subscribers.add(sub);
    return () => {
      this.subscribers.delete(sub);
      if (this.subscribers.size === 0 && this.timer !== undefined) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** End every stream (server shutdown): clients reconnect with Last-Event-ID and lose nothing. */
  closeAll(): void {
    for (const sub of [...this.subscribers]) sub.close();
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
          if (t.id > sub.lastId && matchesFilter(t.circuit, sub.filter)) {
            sub.lastId = t.id;
            sub.send(t);
          }
        }
      }
      if (rows.length < PAGE) return;
    }
  }

  private replay(sub: Subscriber): void {
    for (;;) {
      const rows = this.options.log.after(sub.lastId, PAGE, sub.filter);
      for (const t of rows) {
        sub.lastId = t.id;
        sub.send(t);
      }
      if (rows.length < PAGE) return;
    }
  }
}
