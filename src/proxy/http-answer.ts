import { Readable } from 'node:stream';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Logger } from 'pino';
import { DiscardSink, type Attempt } from './attempt.js';
import { primaryKey } from './cache-rules.js';
import type { FailoverDeps } from './failover.js';
import type { FallbackAnswer } from './fallback.js';
import { downstreamFlatHeaders, flatToRecord, removeFlat, toWebHeaders, type FlatHeaders } from './forward-headers.js';
import { ForwardSink } from './forward-sink.js';
import type { ProxyCall, ProxyInput } from './proxy-call.js';
import { CALLER_GONE, pushNodeMarkers } from './proxy-errors.js';
import { report, type Report, type ReportedNode } from './proxy-hooks.js';
import { sendResponse } from './send-response.js';
import { sendWhole } from './send-timeout.js';
import type { StaleCache, StaleCapture } from './stale-cache.js';
import type { NodeUse } from './node-picker.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/** Writing HTTP answers to the caller: a node's streamed answer, a coalesced copy, a fallback. */

const NO_BODY_STATUSES = new Set([204, 205, 304]);
/** No Content-Length on these (RFC 9110 section 8.6; nginx drops it too): they never have content. */
const NO_LENGTH_STATUSES = new Set([204, 304]);

export type AnswerDeps = FailoverDeps & { readonly logger: Logger };

/**
 * Pass a node's answer on; with `judge`, its outcome goes to the node's circuit once the
 * body has ended: a reset or a silence over request_timeout_ms inside the body is a node
 * failure, even though the head was already passed on. A body cut by the caller leaving
 * says nothing against the node.
 */
export function streamAnswer(
  deps: AnswerDeps,
  call: ProxyCall,
  node: ProxyNode,
  attempt: Attempt,
  judge: boolean,
  use: NodeUse,
): Response {
  const { parts } = call;
  const status = attempt.status;
  const headers = downstreamFlatHeaders(attempt.rawHeaders);
  if (NO_LENGTH_STATUSES.has(status)) removeFlat(headers, 'content-length');
  pushNodeMarkers(headers, node, use);
  report(parts.report, node, status);
  const noBody = parts.method === 'HEAD' || NO_BODY_STATUSES.has(status);
  const stale = parts.upstream.stale;
  const keep =
    stale !== null && parts.method === 'GET' && status === 200 ? staleCapture(deps, call, stale, headers) : null;
  call.handOff();
  const flight =
    parts.flight !== null && parts.flight.head(status, headers.slice(), contentLength(headers)) ? parts.flight : null;
  const sink = new ForwardSink(deps.logger, call, node, judge, keep, flight, attempt.startedAt);
  const outgoing = parts.input.outgoing;
  // An answer without content is complete with its head; whatever undici says of its body
  // afterwards (it calls a 304 with a Content-Length short) is no concern of the caller's.
  const feed = (target: ForwardSink) =>
    noBody ? (attempt.attach(new DiscardSink(attempt)), target.end()) : attempt.attach(target);
  if (outgoing !== undefined) {
    if (!call.detached) outgoing.writeHead(status, headers);
    sink.sendTo(outgoing);
    feed(sink);
    return RESPONSE_ALREADY_SENT;
  }
  const web = noBody ? null : new Readable({ read: () => sink.resume() });
  // A web reader that cancels (the caller left) stops the node's body as a hang-up would.
  web?.once('close', () => call.done || attempt.cancel('caller_gone', CALLER_GONE));
  sink.web = web;
  feed(sink);
  return new Response(web === null ? null : (Readable.toWeb(web) as ReadableStream<Uint8Array>), {
    status,
    headers: toWebHeaders(flatToRecord(headers)),
  });
}

function staleCapture(deps: AnswerDeps, call: ProxyCall, stale: StaleCache, headers: FlatHeaders): StaleCapture | null {
  const record = flatToRecord(headers);
  if (!stale.mayStore(call.parts.requestHeaders, 200, record)) return null;
  delete record['x-node'];
  delete record['x-dc'];
  delete record['x-degraded'];
  return stale.capture(staleKey(call), call.parts.requestHeaders, 200, record, deps.clock);
}

/** A fallback answer (stale or static), complete at once; the leader's followers get it too. */
export function sendFallback(call: ProxyCall, fallback: FallbackAnswer): Response {
  const { parts } = call;
  parts.flight?.answer(fallback.status, recordToFlat(fallback.headers), fallback.body);
  report(parts.report, null, fallback.status);
  const outgoing = call.detached ? undefined : parts.input.outgoing;
  const body = parts.method === 'HEAD' ? null : fallback.body;
  if (outgoing === undefined) return sendResponse(undefined, fallback.status, fallback.headers, body);
  sendWhole(outgoing.writeHead(fallback.status, fallback.headers), body, parts.upstream);
  return RESPONSE_ALREADY_SENT;
}

/** A follower's copy of the leader's answer, marked `X-Coalesced: true`. */
export function sendCoalesced(
  input: ProxyInput,
  upstream: Upstream,
  r: Report | null,
  status: number,
  leaderHeaders: FlatHeaders,
  leaderBody: Buffer,
): Response {
  report(r, nodeOfHeaders(leaderHeaders), status);
  const headers = [...leaderHeaders, 'x-coalesced', 'true'];
  const body = input.method === 'HEAD' || NO_BODY_STATUSES.has(status) ? null : leaderBody;
  const outgoing = input.outgoing;
  if (outgoing === undefined)
    return new Response(body === null ? null : new Uint8Array(body), {
      status,
      headers: toWebHeaders(flatToRecord(headers)),
    });
  if (outgoing.destroyed) return RESPONSE_ALREADY_SENT; // a follower that left is simply not answered
  sendWhole(outgoing.writeHead(status, headers), body, upstream);
  return RESPONSE_ALREADY_SENT;
}

/** The stale cache's key: the coalescing one (Host, path and query); the Vary'd fields select the variant. */
export function staleKey(call: ProxyCall): string {
  return primaryKey(call.parts.requestHeaders, call.parts.target.path);
}

/** The node named in a coalesced answer's X-Node / X-Dc / X-Degraded headers. */
function nodeOfHeaders(headers: FlatHeaders): ReportedNode | null {
  const get = (name: string) => {
    for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return headers[i + 1];
    return undefined;
  };
  const id = get('x-node');
  const dc = get('x-dc');
  return id === undefined || dc === undefined ? null : { id, dc, local: get('x-degraded') === 'false' };
}

function contentLength(headers: FlatHeaders): number {
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === 'content-length') return Number(headers[i + 1]);
  return 0;
}

function recordToFlat(record: Record<string, string | string[]>): FlatHeaders {
  const out: FlatHeaders = [];
  for (const name in record) {
    const value = record[name]!;
    if (Array.isArray(value)) for (const v of value) out.push(name, v);
    else out.push(name, value);
  }
  return out;
}
