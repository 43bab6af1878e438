import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
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

/** Answer the caller with a complete body: on Node's response when there is one, else as a web Response. */
export function sendResponse(
  outgoing: ServerResponse | undefined,
  status: number,
  headers: Record<string, string | string[]>,
  body: Buffer | null,
): Response {
  if (outgoing !== undefined) {
    outgoing.writeHead(status, headers).end(body ?? undefined);
    return RESPONSE_ALREADY_SENT;
  }
  return new Response(body === null ? null : new Uint8Array(body), { status, headers: toWebHeaders(headers) });
}

/** Throw away an upstream body we will not pass on, keeping the connection reusable. */
export function discardBody(body: Readable): void {
  const dump = (body as { dump?: (opts?: { limit: number }) => Promise<void> }).dump;
  if (typeof dump === 'function')
    dump.call(body, { limit: 256 * 1024 }).catch(() => {}); // 256 KiB, then close the socket
  else body.resume();
}
