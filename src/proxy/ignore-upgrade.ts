import type http from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

/** Fields of an upgrade offer that mean nothing once it is declined (RFC 9113 section 3.2: HTTP2-Settings is hop-by-hop). */
const OFFER_FIELDS = new Set(['upgrade', 'http2-settings']);

/** Whether the `Upgrade` offer names WebSocket (those stay with the WebSocket pass-through, or its 501). */
export function offersWebSocket(incoming: http.IncomingMessage): boolean {
  return String(incoming.headers.upgrade ?? '')
    .split(',')
    .some((p) => p.trim().toLowerCase() === 'websocket');
}

/**
 * Decline an upgrade nobody here offers (`h2c` from curl --http2 or Java's HttpClient): serve
 * the request as plain HTTP/1.1 on the same connection, as nginx does; a server MAY ignore
 * `Upgrade` (RFC 9110 section 7.8). node:http has already handed the socket over, so the
 * request head is written again without the offer and the socket given back to the server
 * as a new connection (node:http documents emitting 'connection' for that); the body bytes
 * that came with the head follow it. False when the socket has no server to go back to.
 */
export function serveWithoutUpgrade(incoming: http.IncomingMessage, socket: Duplex, head: Buffer): boolean {
  const server = (socket as Socket & { server?: http.Server }).server; // set by node:http for each connection
  if (server === undefined) return false;
  const raw = incoming.rawHeaders;
  let text = `${incoming.method} ${incoming.url} HTTP/${incoming.httpVersion}\r\n`;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (OFFER_FIELDS.has(name)) continue;
    if (name === 'connection') {
      const kept = raw[i + 1]!.split(',')
        .map((t) => t.trim())
        .filter((t) => t !== '' && !OFFER_FIELDS.has(t.toLowerCase()));
      if (kept.length > 0) text += `${raw[i]}: ${kept.join(', ')}\r\n`;
      continue;
    }
    text += `${raw[i]}: ${raw[i + 1]}\r\n`;
  }
  socket.unshift(Buffer.concat([Buffer.from(`${text}\r\n`, 'latin1'), head]));
  server.emit('connection', socket);
  return true;
}
