/**
 * An incremental `text/event-stream` parser, just enough of the WHATWG rules
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
 * for circuitlog's stream: `event`, `data`, `id` fields, comments, blank-line dispatch.
 * Bounded: a line or an event past its limit throws `SseLimitError` (the caller drops the
 * stream and reconnects), and each byte is scanned once, however the stream is chunked.
 */

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
  /** The characters after the last complete line (at most `maxLineChars`). */
  private buffer = '';
  /** Where the search for the next newline resumes: nothing before it is scanned twice. */
  private scanFrom = 0;
  private event = '';
  private data: string[] = [];
  private dataChars = 0;
  private lastId: string | undefined;
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly onMessage: (message: SseMessage) => void,
    private readonly limits: SseLimits = SSE_LIMITS,
  ) {}

  /** Feed bytes as they arrive; chunks may split lines and UTF-8 characters anywhere. Throws `SseLimitError`. */
  push(chunk: Uint8Array): void {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    let start = 0; // start of the line being looked at
    NEWLINE.lastIndex = this.scanFrom;
    let match: RegExpExecArray | null;
    while ((match = NEWLINE.exec(this.buffer)) !== null) {
      // A lone '\r' at the very end may be the first half of '\r\n': wait for more.
      if (match[0] === '\r' && match.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(start, match.index);
      start = NEWLINE.lastIndex;
      if (line.length > this.limits.maxLineChars) throw this.tooLong();
      this.line(line);
    }
    this.buffer = this.buffer.slice(start);
    // Resume at a trailing '\r' (it may pair with the next '\n'), else after what was scanned.
    this.scanFrom = this.buffer.endsWith('\r') ? this.buffer.length - 1 : this.buffer.length;
    if (this.buffer.length > this.limits.maxLineChars) throw this.tooLong();
  }

  private tooLong(): SseLimitError {
    return new SseLimitError(`event stream line over ${this.limits.maxLineChars} characters`);
  }

  private line(line: string): void {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return; // a comment: the server's heartbeat
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') {
      this.dataChars += value.length + 1;
      if (this.dataChars > this.limits.maxEventChars) throw new SseLimitError(`event stream event over ${this.limits.maxEventChars} characters`);
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
