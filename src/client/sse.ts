/**
 * An incremental `text/event-stream` parser, just enough of the WHATWG rules
 * (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
 * for circuitlog's stream: `event`, `data`, `id` fields, comments, blank-line dispatch.
 */

export interface SseMessage {
  readonly event: string;
  readonly data: string;
  /** The last `id:` seen so far (it persists across messages, as the spec says). */
  readonly id: string | undefined;
}

export class SseParser {
  private buffer = '';
  private event = '';
  private data: string[] = [];
  private lastId: string | undefined;
  private readonly decoder = new TextDecoder();

  constructor(private readonly onMessage: (message: SseMessage) => void) {}

  /** Feed bytes as they arrive; chunks may split lines and UTF-8 characters anywhere. */
  push(chunk: Uint8Array): void {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    let newline: number;
    while ((newline = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      // A lone '\r' at the very end may be the first half of '\r\n': wait for more.
      if (this.buffer[newline] === '\r' && newline === this.buffer.length - 1) break;
      const width = this.buffer.startsWith('\r\n', newline) ? 2 : 1;
      const line = this.buffer.slice(0, newline);
      this.buffer = this.buffer.slice(newline + width);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return; // a comment: the server's heartbeat
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
    else if (field === 'id' && !value.includes('\0')) this.lastId = value;
  }

  private dispatch(): void {
    if (this.data.length > 0) {
      this.onMessage({ event: this.event || 'message', data: this.data.join('\n'), id: this.lastId });
    }
    this.event = '';
    this.data = [];
  }
}
