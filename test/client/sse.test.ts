import { describe, expect, it, vi } from 'vitest';
import { SseLimitError, SseParser, type SseMessage } from '../../src/client/sse.js';

function parse(chunks: (string | Uint8Array)[]): SseMessage[] {
  const messages: SseMessage[] = [];
  const parser = new SseParser((m) => messages.push(m));
  for (const c of chunks) parser.push(typeof c === 'string' ? new TextEncoder().encode(c) : c);
  return messages;
}

describe('SSE parser', () => {
  it('dispatches an event on a blank line with its event, data and id', () => {
    expect(parse(['event: transition\nid: 7\ndata: {"a":1}\n\n'])).toEqual([
      { event: 'transition', data: '{"a":1}', id: '7' },
    ]);
  });

  it('ignores comments (heartbeats) and joins multi-line data', () => {
    expect(parse([': heartbeat\n\n', 'data: a\ndata: b\n\n'])).toEqual([
      { event: 'message', data: 'a\nb', id: undefined },
    ]);
  });

  it('reassembles lines and UTF-8 characters split across chunks, CRLF included', () => {
    const bytes = new TextEncoder().encode('event: transition\r\nid: 3\r\ndata: "é"\r\n\r\n');
    const split = bytes.indexOf(0xc3) + 1; // inside the two-byte 'é'
    const crlf = bytes.indexOf(0x0d) + 1; // between '\r' and '\n'
    expect(parse([bytes.slice(0, crlf), bytes.slice(crlf, split), bytes.slice(split)])).toEqual([
      { event: 'transition', data: '"é"', id: '3' },
    ]);
  });

  it('keeps the last id for later events without one, and resets the event type', () => {
    const messages = parse(['event: transition\nid: 9\ndata: x\n\ndata: y\n\n']);
    expect(messages[1]).toEqual({ event: 'message', data: 'y', id: '9' });
  });
});

describe('SSE parser limits', () => {
  const limits = { maxLineChars: 100, maxEventChars: 250 };
  const feed = (text: string) => new SseParser(() => {}, limits).push(new TextEncoder().encode(text));

  it('throws SseLimitError on a line past the limit, even one that never ends', () => {
    const parser = new SseParser(() => {}, limits);
    parser.push(new TextEncoder().encode('data: ' + 'x'.repeat(90)));
    expect(() => parser.push(new TextEncoder().encode('x'.repeat(20)))).toThrow(SseLimitError);
  });

  it('throws on data lines that add up past the event limit without a blank line', () => {
    expect(() => feed('data: ' + 'y'.repeat(90) + '\n')).not.toThrow();
    expect(() => feed(('data: ' + 'y'.repeat(90) + '\n').repeat(3))).toThrow(SseLimitError);
  });

  it('takes events up to the limits, and counts each event afresh', () => {
    const messages: SseMessage[] = [];
    const parser = new SseParser((m) => messages.push(m), limits);
    for (let i = 0; i < 10; i++)
      parser.push(new TextEncoder().encode(('data: ' + 'z'.repeat(90) + '\n').repeat(2) + '\n'));
    expect(messages).toHaveLength(10);
  });

  it('scans each character once: a big event in small chunks is not searched again per chunk', () => {
    // Counted, not timed: the characters every newline search starts before, summed.
    const big = { maxLineChars: 1 << 20, maxEventChars: 1 << 24 };
    const bytes = new TextEncoder().encode('data: ' + 'a'.repeat(1 << 19) + '\n\n'); // one 512 Ki-character event
    const parser = new SseParser(() => {}, big);
    let scanned = 0;
    const exec = RegExp.prototype.exec;
    const spy = vi.spyOn(RegExp.prototype, 'exec').mockImplementation(function (this: RegExp, text: string) {
      scanned += text.length - (this.global || this.sticky ? this.lastIndex : 0);
      return exec.call(this, text);
    });
    try {
      for (let i = 0; i < bytes.length; i += 1024) parser.push(bytes.subarray(i, i + 1024));
    } finally {
      spy.mockRestore();
    }
    expect(scanned).toBeLessThanOrEqual(2 * bytes.length); // quadratic would be about 130 million
  });
});
