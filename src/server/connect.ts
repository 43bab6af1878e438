import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import { endSocketWithProblem } from '../http/problem.js';
import { logFailure } from '../http/request-failure.js';
import { incomingRequestId } from '../request-id.js';

/**
 * Handler for node:http's `connect` event. CONNECT never reaches the request handler:
 * without a listener Node destroys the socket and the client gets no answer at all. This
 * answers 405 problem+json instead; the empty `Allow` says the target (a tunnel to
 * host:port) allows no method here (RFC 9110 section 10.2.1). circuitlog is no forward proxy.
 */
export function rejectConnect(logger: Logger, clock: () => number) {
  return (request: IncomingMessage, socket: Duplex): void => {
    const target = request.url ?? '';
    const error = new AppError(
      'METHOD_NOT_ALLOWED',
      'CONNECT is not allowed: circuitlog is not a forward proxy (its proxy is /proxy/<upstream>/...).',
      {
        headers: { allow: '' },
      },
    );
    const requestId = incomingRequestId(request);
    logFailure(logger, 'CONNECT', target, error, requestId);
    socket.on('error', () => socket.destroy()); // the client may already be gone; nothing to tell it
    endSocketWithProblem(socket, error, target, requestId, clock());
  };
}
