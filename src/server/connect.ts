import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import { problemParts } from '../http/problem.js';

/**
 * Handler for node:http's `connect` event. CONNECT never reaches the request handler:
 * without a listener Node destroys the socket and the client gets no answer at all. This
 * answers 405 problem+json instead; the empty `Allow` says the target (a tunnel to
 * host:port) allows no method here (RFC 9110 section 10.2.1). circuitlog is no forward proxy.
 */
export function rejectConnect(logger: Logger, clock: () => number) {
  return (request: IncomingMessage, socket: Duplex): void => {
    const target = request.url ?? '';
    const error = new AppError('METHOD_NOT_ALLOWED', 'CONNECT is not allowed: circuitlog is not a forward proxy (its proxy is /proxy/<upstream>/...).', {
      headers: { allow: '' },
    });
    const { status, headers, body } = problemParts(error, target, clock());
    logger.info({ event: 'request_failed', method: 'CONNECT', path: target, status, code: error.code }, error.message);
    const head = [`HTTP/1.1 ${status} Method Not Allowed`, ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)];
    head.push(`content-length: ${Buffer.byteLength(body)}`, 'connection: close');
    socket.on('error', () => socket.destroy()); // the client may already be gone; nothing to tell it
    socket.end(`${head.join('\r\n')}\r\n\r\n${body}`);
  };
}
