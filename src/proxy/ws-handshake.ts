import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { answerKind, SUCCESS, type Transport, type Tried } from './failover.js';
import type { ProxyCall } from './proxy-call.js';
import { isNothingSent } from './upstream-client.js';
import type { ProxyNode } from './upstreams.js';

/** A node's answer to the handshake: its 101 with the switched socket, or any other answer. */
export interface HandshakeAnswer {
  readonly res: http.IncomingMessage;
  /** Set on a 101: the node's socket and the bytes that came after its head. */
  readonly switched: { readonly socket: Socket; readonly head: Buffer } | null;
}

/**
 * The WebSocket handshake as the failover core's transport: one `GET` with `Upgrade: websocket`
 * per attempt, on its own connection; `client` is the caller's connection, whose closing ends
 * the handshake in progress.
 */
export function handshakeTransport(call: ProxyCall, client: Duplex, logger: Logger): Transport<HandshakeAnswer> {
  return {
    call,
    attempt: (node, startedAt) => handshake(call, client, logger, node, startedAt),
    replayable: () => true, // a handshake has no body
    discard: (answer) => (answer.switched === null ? answer.res.resume() : answer.switched.socket.destroy()),
  };
}

function handshake(
  call: ProxyCall,
  client: Duplex,
  logger: Logger,
  node: ProxyNode,
  startedAt: number,
): Promise<Tried<HandshakeAnswer>> {
  const { upstream, target, headers } = call.parts;
  const url = new URL(node.origin);
  const request = (url.protocol === 'https:' ? https : http).request({
    host: url.hostname.replace(/^\[|\]$/g, ''),
    port: url.port || (url.protocol === 'https:' ? 443 : 80),
    path: node.basePath + target.path,
    method: 'GET',
    headers,
    agent: false, // a tunnel owns its connection
  });
  return new Promise((resolve) => {
    let settled = false;
    const settle = (outcome: Tried<HandshakeAnswer>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.off('close', onCallerGone);
      resolve(outcome);
    };
    const timer = setTimeout(() => {
      settle({ kind: 'timeout', startedAt });
      request.destroy();
    }, upstream.config.request_timeout_ms);
    const onCallerGone = () => {
      settle({ kind: 'caller_gone', startedAt, cancelled: true });
      request.destroy();
    };
    client.once('close', onCallerGone);
    request.once('upgrade', (res, socket, head) =>
      settle({ kind: 'answer', answer: { res, switched: { socket, head } }, outcome: SUCCESS, startedAt }),
    );
    request.once('response', (res) =>
      settle({
        kind: 'answer',
        answer: { res, switched: null },
        outcome: answerKind(
          upstream,
          res.statusCode ?? 0,
          { retryAfter: () => res.headers['retry-after'] },
          call.now(),
        ),
        startedAt,
      }),
    );
    request.once('error', (error) => {
      if (!settled)
        logger.warn(
          {
            event: 'upstream_failed',
            upstream: upstream.name,
            node: node.id,
            kind: 'upgrade',
            err: error.message,
            request_id: call.parts.input.requestId,
          },
          `${node.circuit}: upgrade failed`,
        );
      settle({ kind: isNothingSent(error) ? 'refused' : 'unreachable', startedAt });
    });
    request.end();
  });
}
