import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import { problemFetchResponse } from '../http/problem.js';
import { requestIdFrom } from '../request-id.js';

/**
 * `errorHandler` for @hono/node-server's request listener. The adapter refuses some requests
 * before the app sees them (a backslash in the path, no Host header, an invalid absolute
 * URL) and would answer a bare 400 with no body; this answers problem+json instead. Anything
 * else reaching here is a bug: a 500 problem, with the error logged, never returned.
 */
export function adapterErrorHandler(logger: Logger, clock: () => number) {
  return (error: unknown): Response => {
    const refused = (error as { name?: unknown } | null)?.name === 'RequestError';
    const appError = refused
      ? new AppError('BAD_REQUEST', `The request cannot be routed: ${(error as Error).message}.`)
      : new AppError('INTERNAL', 'An internal error occurred.', { cause: error });
    // The adapter hands over only the error, not the request: `instance` is left out rather
    // than guessed, and the caller's X-Request-Id cannot be read, so the id is a made one.
    const fields = { event: 'request_failed', code: appError.code, request_id: requestIdFrom(undefined) };
    if (refused) logger.info({ ...fields, status: 400 }, appError.message);
    else logger.error({ ...fields, status: 500, err: error }, appError.message);
    return problemFetchResponse(appError, fields.request_id, clock());
  };
}
