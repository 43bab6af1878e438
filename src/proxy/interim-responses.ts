import type { Socket } from 'node:net';

const HEAD_END = Buffer.from('\r\n\r\n');
const STATUS_LINE_BYTES = 12; // 'HTTP/1.1 100'

/**
 * Make a node's socket drop interim (1xx) responses before undici's parser sees them.
 *
 * RFC 9110 section 15.2: a client must accept 1xx responses it did not ask for, and skip
 * them. undici destroys the connection on a `100 Continue` it did not expect ('bad
 * response'), which turned a node that always sends one into a failing node. The proxy never
 * sends `Expect`, so every 1xx but `101 Switching Protocols` carries nothing for the caller.
 *
 * undici writes each request head as one latin1 string and runs one request per connection
 * at a time (pipelining 1), so the bytes read after a head is written start a response; only
 * those first bytes are inspected (two boolean checks per read or write otherwise).
 */
export function skipInterimResponses(socket: Socket): void {
  let expectHead = false;
  let pending: Buffer | null = null;
  const write = socket.write;
  const read = socket.read;
  socket.write = function (this: Socket, chunk: unknown, ...rest: unknown[]) {
    // A request head, not a chunk-size line ('\r\n…') or body bytes (Buffers).
    if (typeof chunk === 'string' && chunk.charCodeAt(0) !== 13) expectHead = true;
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as Socket['write'];
  socket.read = function (this: Socket, size?: number) {
    const chunk = read.call(this, size) as Buffer | null;
    if (!expectHead || chunk === null) return chunk;
    let data = pending === null ? chunk : Buffer.concat([pending, chunk]);
    pending = null;
    for (;;) {
      if (data.length < STATUS_LINE_BYTES) {
        pending = data;
        return null; // the next 'readable' brings the rest of the status line
      }
      if (!isInterimStatusLine(data)) {
        expectHead = false;
        return data;
      }
      const end = data.indexOf(HEAD_END);
      if (end === -1) {
        pending = data;
        return null;
      }
      data = data.subarray(end + HEAD_END.length);
      if (data.length === 0) return null;
    }
  } as Socket['read'];
}

/** `HTTP/1.x 1xx` other than 101 (which starts a tunnel and is undici's to handle). */
function isInterimStatusLine(data: Buffer): boolean {
  return (
    data[0] === 0x48 && // 'H'
    data.toString('latin1', 0, 7) === 'HTTP/1.' &&
    data[9] === 0x31 && // '1'
    data.toString('latin1', 9, 12) !== '101'
  );
}
