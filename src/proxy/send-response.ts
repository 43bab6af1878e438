import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context } from 'hono';
import { toWebHeaders } from './forward-headers.js';

/** What @hono/node-server passes as `c.env`; absent under `app.request()`. */
export interface NodeBindings {
  readonly incoming?: IncomingMessage;
  readonly outgoing?: ServerResponse;
}

export function nodeBindings(c: Context): NodeBindings {
  return (c.env ?? {}) as NodeBindings;
}

/**
 * Answer the caller. Behind @hono/node-server the upstream stream is piped straight into
 * the Node response (no web-stream conversion on the hot path); elsewhere a web Response.
 */
export function sendResponse(
  outgoing: ServerResponse | undefined,
  status: number,
  headers: Record<string, string | string[]>,
  body: Readable | Buffer | null,
): Response {
  if (outgoing !== undefined) {
    outgoing.writeHead(status, headers);
    if (body instanceof Readable) {
      pipeBody(body, outgoing);
    } else {
      outgoing.end(body ?? undefined);
    }
    return RESPONSE_ALREADY_SENT;
  }
  const webBody = body instanceof Readable ? (Readable.toWeb(body) as ReadableStream<Uint8Array>) : body === null ? null : new Uint8Array(body);
  return new Response(webBody, { status, headers: toWebHeaders(headers) });
}

/**
 * `body.pipe(outgoing)`, with the error handling `pipe` lacks: a failing upstream body
 * cuts the caller's response, and a caller that leaves stops the upstream body. Cheaper
 * per request than `stream.pipeline`, which builds an AbortController and a DOMException.
 */
function pipeBody(body: Readable, outgoing: ServerResponse): void {
  body.once('error', (error) => outgoing.destroy(error));
  outgoing.once('close', () => {
    if (!body.readableEnded) body.destroy();
  });
  body.pipe(outgoing);
}

/** Throw away an upstream body we will not pass on, keeping the connection reusable. */
export function discardBody(body: Readable): void {
  const dump = (body as { dump?: (opts?: { limit: number }) => Promise<void> }).dump;
  if (typeof dump === 'function') dump.call(body, { limit: 256 * 1024 }).catch(() => {}); // 256 KiB, then close the socket
  else body.resume();
}
