import { randomFillSync } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The request id: every answer carries one in `X-Request-Id`, every problem document in
 * `request_id`, every log line about the request in `request_id`, and the proxy sends it to
 * the node. A well-formed incoming id is kept (the caller's, or a load balancer's before us);
 * anything else is replaced by a made one and never echoed.
 *
 * Hono's `requestId` middleware (hono/request-id) makes the same choice with the same check,
 * but it runs inside the router; the id is needed before it (the guards' refusals) and on
 * the answers that bypass Hono (raw-allowed.ts, raw-listeners.ts), so the rule lives here
 * once and every path calls `requestIdFrom`.
 */
export const REQUEST_ID_HEADER = 'x-request-id';

/** The problem document member and the log field (snake_case, as every other member). */
export const REQUEST_ID_FIELD = 'request_id';

/** Hono's default check: 1 to 255 of `A-Z a-z 0-9 _ - =` (a UUID, hex, base64url, `Root=1-…`). */
export const WELL_FORMED_REQUEST_ID = /^[\w\-=]{1,255}$/;

/** Ids made per draw of random bytes: 16 bytes each, so one `randomFillSync` of 4 KiB serves 256. */
const IDS_PER_DRAW = 256;
const UUID_LENGTH = 36; // 8-4-4-4-12 hex digits and dashes
/** Where each of a UUID's 16 bytes goes in its text (two hex digits each; dashes at 8, 13, 18, 23). */
const DIGIT_AT = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34];
/** A byte's first and second hex digit, as ASCII codes. */
const HIGH_DIGIT = Uint8Array.from({ length: 256 }, (_, b) => '0123456789abcdef'.charCodeAt(b >> 4));
const LOW_DIGIT = Uint8Array.from({ length: 256 }, (_, b) => '0123456789abcdef'.charCodeAt(b & 0x0f));

/**
 * A maker of random UUIDs (RFC 9562 version 4: 122 random bits), drawing its random bytes in
 * bulk: one `fill` (the CSPRNG's `randomFillSync`) of 4 KiB per 256 ids, written out at once as
 * their 256 texts in one ASCII buffer; each id is then one copy of its 36 bytes into a string
 * of its own (flat: node:http checks every header value with a regular expression, and the
 * string `crypto.randomUUID` builds by concatenation must be flattened first). As unguessable
 * and as unique across hosts as `crypto.randomUUID`, which also draws in bulk (2 KiB per 128
 * ids), in about half its time (docs/performance.md). A few lines of our own rather than a
 * dependency: the `uuid` package's v4 (9 and later) is `crypto.randomUUID`. Bounded: 4 KiB of
 * random bytes and 9 KiB of text per maker.
 */
export function uuidMaker(fill: (bytes: Buffer) => void = randomFillSync): () => string {
  const random = Buffer.alloc(IDS_PER_DRAW * 16);
  const text = Buffer.alloc(IDS_PER_DRAW * UUID_LENGTH, '-'); // the dashes stay; the digits are written per draw
  let next = IDS_PER_DRAW;
  const draw = () => {
    fill(random);
    for (let id = 0; id < IDS_PER_DRAW; id++) {
      const from = id * 16;
      random[from + 6] = (random[from + 6]! & 0x0f) | 0x40; // version 4
      random[from + 8] = (random[from + 8]! & 0x3f) | 0x80; // variant 10 (RFC 9562)
      const to = id * UUID_LENGTH;
      for (let i = 0; i < 16; i++) {
        const byte = random[from + i]!;
        const at = to + DIGIT_AT[i]!;
        text[at] = HIGH_DIGIT[byte]!;
        text[at + 1] = LOW_DIGIT[byte]!;
      }
    }
    next = 0;
  };
  return () => {
    if (next === IDS_PER_DRAW) draw();
    const start = UUID_LENGTH * next++;
    return text.toString('latin1', start, start + UUID_LENGTH);
  };
}

/** A new random UUID (version 4), for a request without a well-formed id of its own. */
export const newRequestId = uuidMaker();

/** The caller's `X-Request-Id` when well-formed, else a new random UUID (RFC 9562 version 4). */
export function requestIdFrom(incoming: string | undefined): string {
  return incoming !== undefined && WELL_FORMED_REQUEST_ID.test(incoming) ? incoming : newRequestId();
}

/** `requestIdFrom` on Node's request (repeated fields come joined with ', ', as `Headers` joins them: not well-formed). */
export function incomingRequestId(incoming: IncomingMessage): string {
  const value = incoming.headers[REQUEST_ID_HEADER];
  return requestIdFrom(typeof value === 'string' ? value : undefined);
}

/** What @hono/node-server passes as `c.env`, plus the id `guardFetch` put there (http/request-guard.ts). */
export interface RequestEnv {
  requestId?: string;
}

/** The id of the request a Hono context serves (set by `guardFetch` before the router). */
export function contextRequestId(c: { env: unknown }): string {
  return (c.env as RequestEnv | undefined)?.requestId ?? newRequestId(); // always set when served through app.fetch
}

/**
 * Bind the id to one request on its way into Hono's router: the env the routes read it from
 * (`contextRequestId`), and the answer's header. Served by @hono/node-server, the header is set
 * on Node's response at once (`setHeader`), so every way the answer is written carries it (a
 * Response, a stream, a problem); under `app.request()` it is added to the Response
 * (`withRequestIdHeader`). `headerSetByRoute`: the proxy writes its heads itself, as flat lists
 * with the id in them (proxy/http-answer.ts); a field set beforehand would make node:http's
 * `writeHead` go through `setHeader` per field, which on Node 20 keeps only the last of
 * repeated fields (a node's two Set-Cookie).
 *
 * Of the ways tried (CPU per small answer, in-process, Node 20), a field in the head's own
 * object costs least (the raw listeners do that), `setHeader` beforehand more, and replacing
 * `writeHead` on each response object most (an own property per response).
 */
export function bindRequestId(
  env: unknown,
  requestId: string,
  headerSetByRoute: boolean,
): RequestEnv & { outgoing?: ServerResponse } {
  if (typeof env !== 'object' || env === null) return { requestId };
  const bound = env as RequestEnv & { outgoing?: ServerResponse };
  bound.requestId = requestId;
  if (!headerSetByRoute) bound.outgoing?.setHeader(REQUEST_ID_HEADER, requestId);
  return bound;
}

/** The answer with `X-Request-Id` set, for a caller with no Node response (`app.request()`). */
export function withRequestIdHeader(
  answer: Response | Promise<Response>,
  requestId: string,
): Response | Promise<Response> {
  if (answer instanceof Promise) return answer.then((response) => withRequestIdHeader(response, requestId));
  answer.headers.set(REQUEST_ID_HEADER, requestId);
  return answer;
}
