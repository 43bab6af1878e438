/**
 * The event stream on the client's side, `/events/stream`:
 * - an incremental `text/event-stream` parser, just enough of the WHATWG rules
 *   (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
 *   for circuitlog's stream: `event`, `data`, `id` fields, comments, blank-line dispatch.
 *   Bounded: a line or an event past its limit throws `SseLimitError` (the caller drops the
 *   stream and reconnects), and each byte is scanned once, however the stream is chunked;
 * - the keeper that holds it open: it reconnects at once after a drop, then with exponential
 *   backoff (capped at `maxDelayMs`, 5 s by default) while circuitlog cannot be reached, and
 *   always resumes with `Last-Event-ID`, so no transition is missed across a reconnect or a
 *   server restart.
 */

import {
  TransportError,
  type OpenStream,
  type StreamReset,
  type Transport,
  type TransitionEvent,
} from './transport.js';

export interface SseMessage {
  readonly event: string;
  readonly data: string;
  /** The last `id:` seen so far (it persists across messages, as the spec says). */
  readonly id: string | undefined;
}

export interface SseLimits {
  /** Longest line, in characters (UTF-16 code units, so at most twice as many bytes held). */
  readonly maxLineChars: number;
  /** Most `data` characters in one event, its lines joined. */
  readonly maxEventChars: number;
}

/** Defaults: circuitlog's events are a few hundred characters; these leave room and bound memory. */
export const SSE_LIMITS: SseLimits = {
  maxLineChars: 64 * 1024, // 64 Ki characters
  maxEventChars: 1024 * 1024, // 1 Mi characters
};

/** The stream broke a limit: drop it (and reconnect). */
export class SseLimitError extends Error {
  readonly code = 'SSE_LIMIT';
  constructor(message: string) {
    super(message);
    this.name = 'SseLimitError';
  }
}

const NEWLINE = /\r\n|\r|\n/g;

export class SseParser {
  /** The pieces of the line not yet ended, as they arrived: never one growing string (V8 would flatten it on every search). */
  private parts: string[] = [];
  private partsChars = 0;
  /** The last chunk ended in '\r': a '\n' starting the next one belongs to it. */
  private skipLineFeed = false;
  private event = '';
  private data: string[] = [];
  private dataChars = 0;
  private lastId: string | undefined;
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly onMessage: (message: SseMessage) => void,
    private readonly limits: SseLimits = SSE_LIMITS,
  ) {}

  /**
   * Feed bytes as they arrive; chunks may split lines and UTF-8 characters anywhere. Only the
   * new chunk is searched. Throws `SseLimitError`.
   */
  push(chunk: Uint8Array): void {
    const text = this.decoder.decode(chunk, { stream: true });
    if (text.length === 0) return;
    let pos = 0;
    if (this.skipLineFeed && text.charCodeAt(0) === 10) pos = 1;
    this.skipLineFeed = false;
    NEWLINE.lastIndex = pos;
    let match: RegExpExecArray | null;
    while ((match = NEWLINE.exec(text)) !== null) {
      const piece = text.slice(pos, match.index);
      if (this.partsChars + piece.length > this.limits.maxLineChars) throw this.tooLong();
      const line = this.parts.length === 0 ? piece : this.parts.join('') + piece;
      this.parts = [];
      this.partsChars = 0;
      pos = NEWLINE.lastIndex;
      // A '\r' ending the chunk may be the first half of '\r\n': skip a '\n' that starts the next.
      if (match[0] === '\r' && pos === text.length) this.skipLineFeed = true;
      this.line(line);
    }
    if (pos < text.length) {
      this.partsChars += text.length - pos;
      if (this.partsChars > this.limits.maxLineChars) throw this.tooLong();
      this.parts.push(text.slice(pos));
    }
  }

  private tooLong(): SseLimitError {
    return new SseLimitError(`event stream line over ${this.limits.maxLineChars} characters`);
  }

  private line(line: string): void {
    if (line === '') {
      this.dispatch();
      return;
    }
    if (line.startsWith(':')) return; // a comment: the server's heartbeat
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') {
      this.dataChars += value.length + 1;
      if (this.dataChars > this.limits.maxEventChars)
        throw new SseLimitError(`event stream event over ${this.limits.maxEventChars} characters`);
      this.data.push(value);
    } else if (field === 'id' && !value.includes('\0')) this.lastId = value;
  }

  private dispatch(): void {
    if (this.data.length > 0) {
      this.onMessage({ event: this.event || 'message', data: this.data.join('\n'), id: this.lastId });
    }
    this.event = '';
    this.data = [];
    this.dataChars = 0;
  }
}

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
