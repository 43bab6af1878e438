import { describe, expect, it } from 'vitest';
import { SseParser, type SseMessage } from '../../src/client/sse.js';

function parse(chunks: (string | Uint8Array)[]): SseMessage[] {
  const messages: SseMessage[] = [];
  const parser = new SseParser((m) => messages.push(m));
  for (const c of chunks) parser.push(typeof c === 'string' ? new TextEncoder().encode(c) : c);
  return messages;
}

describe('SSE parser', () => {
  it('dispatches an event on a blank line with its event, data and id', () => {
    expect(parse(['event: transition\nid: 7\ndata: {"a":1}\n\n'])).toEqual([{ event: 'transition', data: '{"a":1}', id: '7' }]);
  });

  it('ignores comments (heartbeats) and joins multi-line data', () => {
    expect(parse([': heartbeat\n\n', 'data: a\ndata: b\n\n'])).toEqual([{ event: 'message', data: 'a\nb', id: undefined }]);
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
