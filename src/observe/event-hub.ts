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
  /** An `event: audit` frame (issue 30) about `circuit` (null: none), written as it is unless the stream may not see it. */
  readonly sendFrame?: (circuit: string | null, frame: Buffer) => void;
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
const SENDS_PER_TURN = 512; // writes to streams per turn of the event loop (a few ms of work)
const CHECKS_PER_TURN = 65_536; // rows offered to streams whose filter may refuse them, likewise

/** A page of the live tail on its way out: the streams it goes to, and where the last turn stopped. */
interface Fanout {
  readonly rows: readonly LoggedTransition[];
  readonly subs: readonly Subscriber[];
  row: number;
  sub: number;
}

/** A stream whose sink throws on a write is ended (its client resumes); the others go on. */
function sendOrClose(sub: Subscriber, t: LoggedTransition): void {
  try {
    sub.sink.send(t);
  } catch {
    sub.sink.close?.();
  }
}

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
  private fanout: Fanout | undefined;
  private again = false;
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

  /**
   * An audit entry this process stored (issue 30): its frame to every open stream whose filter
   * takes its circuit (an entry about no circuit, as a backup, only to unfiltered streams) and
   * whose credential may read the audit log (the sink decides: observe-routes.ts). Sent
   * at once, not read back from a table: an entry stored by another worker or host reaches the
   * streams of that process only, and a reconnect does not replay audit events (GET /audit does).
   */
  broadcast(circuit: string | null, frame: Buffer): void {
    for (const sub of this.subscribers) {
      if (sub.gone || sub.sink.sendFrame === undefined) continue;
      const wanted =
        circuit === null
          ? sub.filter.circuit === undefined && sub.filter.prefix === undefined
          : matchesFilter(circuit, sub.filter);
      if (!wanted) continue;
      try {
        sub.sink.sendFrame(circuit, frame);
      } catch {
        sub.sink.close?.();
      }
    }
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

  /**
   * Read a page of what is new in the table and hand each row to the streams that want it. A
   * page bound for thousands of streams goes out at most SENDS_PER_TURN writes per turn of the
   * event loop, so requests are answered in between; the next page waits for this one, so every
   * stream still gets the rows in id order. Which stream takes a row is decided as it is sent,
   * so a replay that ends meanwhile neither misses it nor gets it twice.
   */
  poll(): void {
    if (this.fanout !== undefined) {
      this.again = true; // read on once this page is out
      return;
    }
    if (this.subscribers.size === 0) return;
    const rows = this.options.log.after(this.cursor, PAGE);
    const last = rows.at(-1);
    if (last === undefined) return;
    this.cursor = last.id;
    this.again = rows.length === PAGE;
    this.fanout = { rows, subs: [...this.subscribers], row: 0, sub: 0 };
    this.sendSome();
  }

  /** Send the page on from where the last turn stopped; yield once this turn's budget is spent. */
  private sendSome(): void {
    const f = this.fanout!;
    let sends = 0;
    let checks = 0;
    for (; f.row < f.rows.length; f.row++, f.sub = 0) {
      const t = f.rows[f.row]!;
      for (; f.sub < f.subs.length; f.sub++) {
        if (sends === SENDS_PER_TURN || checks === CHECKS_PER_TURN) {
          setImmediate(() => this.sendSome());
          return;
        }
        checks++;
        const sub = f.subs[f.sub]!;
        if (sub.gone || sub.replaying || t.id <= sub.lastId || !matchesFilter(t.circuit, sub.filter)) continue;
        sub.lastId = t.id;
        sends++;
        sendOrClose(sub, t);
      }
    }
    this.fanout = undefined;
    if (this.again) {
      this.again = false;
      setImmediate(() => this.pollQuietly());
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
        sendOrClose(sub, t);
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
