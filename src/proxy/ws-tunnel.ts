import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Slot } from './admission.js';
import { nodeMarkerLines, NOT_RELAYED_ON_SWITCH } from './proxy-errors.js';
import type { NodeUse } from './node-picker.js';
import type { HandshakeAnswer } from './ws-handshake.js';
import type { ProxyNode } from './upstreams.js';

/** A non-101 answer, passed back as sent; the connection closes after it (it was an upgrade request). */
export function relayAnswer(res: http.IncomingMessage, node: ProxyNode, use: NodeUse, client: Duplex): void {
  let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}\r\n`;
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i]!.toLowerCase();
    if (name === 'connection' || name === 'upgrade' || NOT_RELAYED_ON_SWITCH.has(name)) continue;
    head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
  }
  client.write(`${head}${nodeMarkerLines(node, use)}connection: close\r\n\r\n`);
  res.pipe(client); // ends the caller's connection with the body (close-delimited when chunked)
  res.on('error', () => client.destroy());
}

/**
 * The switched connection: the node's 101 head, then bytes both ways (with backpressure)
 * until either side closes. It holds the bulkhead slot while open, and releases it once
 * both sides have closed.
 */
export function tunnel(
  node: ProxyNode,
  use: NodeUse,
  answer: HandshakeAnswer,
  client: Duplex,
  clientHead: Buffer,
  slot: Slot,
): void {
  const { res } = answer;
  const { socket: nodeSocket, head: nodeHead } = answer.switched!;
  let head = `HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}\r\n`;
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    if (!NOT_RELAYED_ON_SWITCH.has(res.rawHeaders[i]!.toLowerCase()))
      head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
  }
  client.write(`${head}${nodeMarkerLines(node, use)}\r\n`);
  if (nodeHead.length > 0) client.write(nodeHead);
  if (clientHead.length > 0) nodeSocket.write(clientHead);
  let open = 2;
  const closed = () => {
    if (--open === 0) slot.release();
  };
  for (const [from, to] of [
    [nodeSocket, client],
    [client, nodeSocket],
  ] as const) {
    from.pipe(to); // pipe pauses `from` while `to` is full: backpressure both ways
    from.on('error', () => to.destroy());
    from.once('close', () => {
      to.end(); // what was sent still arrives, then the other side closes too
      closed();
    });
  }
}
