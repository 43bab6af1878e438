import type { Socket } from 'node:net';
import { AppError } from '../domain/errors.js';
import { endSocketWithProblem } from '../http/problem.js';
import { requestIdFrom } from '../request-id.js';

const ANSWER_WITHIN_MS = 1_000; // a client that sends nothing still gets the answer after this

/**
 * Answer a connection accepted before the service can serve (only the start-up probe of
 * HOST/PORT accepts such connections): a `503 NOT_READY` problem with `Retry-After: 1` and
 * `Connection: close`, written once the request head has arrived (or after a second), so a
 * client never waits on a socket nobody reads. Returns a function that answers at once.
 */
export function answerStarting(socket: Socket, clock: () => number = Date.now): () => void {
  socket.on('error', () => socket.destroy()); // the client may be gone already; nothing to tell it
  let head = '';
  let answered = false;
  const answer = () => {
    if (answered) return;
    answered = true;
    clearTimeout(timer);
    const target = /^[A-Z]+ (\S+)/.exec(head)?.[1] ?? '/';
    const error = new AppError('NOT_READY', 'circuitlog is starting; try again in a moment.', { retryAfterSeconds: 1 });
    const requestId = requestIdFrom(/\r\nx-request-id:[\t ]*([^\r\n]*?)[\t ]*\r\n/i.exec(head)?.[1]);
    endSocketWithProblem(socket, error, target.split('?')[0] ?? '/', requestId, clock());
    setTimeout(() => socket.destroy(), ANSWER_WITHIN_MS).unref(); // never linger past the answer
  };
  const timer = setTimeout(answer, ANSWER_WITHIN_MS);
  timer.unref();
  socket.on('data', (chunk: Buffer) => {
    if (answered) return; // the rest of a request body: read and dropped
    head += chunk.toString('latin1');
    if (head.includes('\r\n\r\n') || head.length > 16 * 1024) answer();
  });
  socket.on('end', answer);
  return answer;
}
