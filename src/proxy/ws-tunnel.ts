import type http from 'node:http';
import type { Duplex, Readable } from 'node:stream';
import { NOT_RELAYED_ON_SWITCH } from './upstream-client.js';
import type { ProxyCall } from './proxy-call.js';
import { type NodeUse, nodeMarkerLines } from './node-picker.js';
import { REQUEST_ID_HEADER } from '../request-id.js';
import type { HandshakeAnswer } from './ws-handshake.js';
import { cutOff, SendWatch } from './send-timeout.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/** The caller's request id on the answer's head, in place of any the node sent (request-id.ts). */
const idLine = (requestId: string): string => `${REQUEST_ID_HEADER}: ${requestId}\r\n`;

/** A non-101 answer, passed back as sent; the connection closes after it (it was an upgrade request). */
export function relayAnswer(
  upstream: Upstream,
  res: http.IncomingMessage,
  node: ProxyNode,
  use: NodeUse,
  client: Duplex,
  requestId: string,
): void {
  let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}\r\n`;
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i]!.toLowerCase();
    if (name === 'connection' || name === 'upgrade' || name === REQUEST_ID_HEADER || NOT_RELAYED_ON_SWITCH.has(name))
      continue;
    head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
  }
  client.write(`${head}${idLine(requestId)}${nodeMarkerLines(node, use)}connection: close\r\n\r\n`);
  res.pipe(client); // ends the caller's connection with the body (close-delimited when chunked)
  res.on('error', () => client.destroy());
  watchCaller(upstream, res, client, () => res.destroy());
}

/**
 * The switched connection: the node's 101 head, then bytes both ways (with backpressure)
 * until either side closes. Its call holds the bulkhead slot while it is open, and ends
 * once both sides have closed. A caller that takes none of the node's bytes for `send_timeout_ms`
 * is cut off, and the node's connection with it.
 */
export function tunnel(
  call: ProxyCall,
  node: ProxyNode,
  use: NodeUse,
  answer: HandshakeAnswer,
  client: Duplex,
  clientHead: Buffer,
): void {
  const { upstream, input } = call.parts;
  const { requestId } = input;
  const { res } = answer;
  const { socket: nodeSocket, head: nodeHead } = answer.switched!;
  let head = `HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}\r\n`;
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i]!.toLowerCase();
    if (name !== REQUEST_ID_HEADER && !NOT_RELAYED_ON_SWITCH.has(name))
      head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
  }
  client.write(`${head}${idLine(requestId)}${nodeMarkerLines(node, use)}\r\n`);
  if (nodeHead.length > 0) client.write(nodeHead);
  if (clientHead.length > 0) nodeSocket.write(clientHead);
  let open = 2;
  const closed = () => {
    if (--open === 0) call.end();
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
  watchCaller(upstream, nodeSocket, client, () => nodeSocket.destroy());
}

/**
 * `send_timeout_ms` on the caller's socket while `from` (the node) sends to it through a
 * pipe: the clock runs while the pipe waits for 'drain'; on the timeout the caller is cut
 * and counted, and `cutNode` frees the node's side (its 'close' gives the slot back).
 */
function watchCaller(upstream: Upstream, from: Readable, client: Duplex, cutNode: () => void): void {
  const watch = new SendWatch(client, upstream.config.send_timeout_ms, () => {
    upstream.sendTimedOut();
    cutOff(client);
    cutNode();
  });
  const check = () => {
    if (client.writableNeedDrain) watch.stalled();
  };
  check(); // the head (and the node's first bytes) may already wait
  from.on('data', check); // after pipe's own listener: the chunk has been written
  client.on('drain', () => watch.settled());
  client.once('close', () => watch.settled());
}
