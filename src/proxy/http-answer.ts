import type { ServerResponse } from 'node:http';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Logger } from 'pino';
import type { Classified } from '../domain/outcome-rules.js';
import { DiscardSink, FAILURE, type Attempt, type BodySink, type FailoverDeps } from './failover.js';
import { primaryKey } from './cache-rules.js';
import type { FallbackAnswer } from './fallback.js';
import { REQUEST_ID_HEADER } from '../request-id.js';
import type { Flight } from './coalesce.js';
import { downstreamFlatHeaders, flatToRecord, removeFlat, setRequestId, type FlatHeaders } from './upstream-client.js';
import { NOBODY_READS } from './proxy-errors.js';
import { type ProxyCall, type ProxyInput, report, type Report, type ReportedNode } from './proxy-call.js';
import { cutOff, SendWatch, sendWhole } from './send-timeout.js';
import type { StaleCache, StaleCapture } from './stale-cache.js';
import { type NodeUse, pushNodeMarkers } from './node-picker.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/** Writing HTTP answers to the caller: a node's streamed answer, a coalesced copy, a fallback. */

const NO_BODY_STATUSES = new Set([204, 205, 304]);
/** No Content-Length on these (RFC 9110 section 8.6; nginx drops it too): they never have content. */
const NO_LENGTH_STATUSES = new Set([204, 304]);

export type AnswerDeps = FailoverDeps & { readonly logger: Logger };

/**
 * Pass a node's answer on; with `judge`, its `outcome` (a success or a rejection) goes to the
 * node's circuit once the body has ended: a reset or a silence over request_timeout_ms inside
 * the body is a node failure, even though the head was already passed on. A body cut by the
 * caller leaving says nothing against the node: the answer's own kind is recorded.
 */
export function streamAnswer(
  deps: AnswerDeps,
  call: ProxyCall,
  node: ProxyNode,
  attempt: Attempt,
  judge: boolean,
  use: NodeUse,
  outcome: Classified,
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
  const outgoing = parts.input.outgoing!;
  const sink = new ForwardSink(deps.logger, call, node, judge, outcome, keep, flight, attempt.startedAt, outgoing);
  setRequestId(headers, parts.input.requestId); // after the copies for the stale cache and followers: each answer its own
  // An answer without content is complete with its head; whatever undici says of its body
  // afterwards (it calls a 304 with a Content-Length short) is no concern of the caller's.
  const feed = (target: ForwardSink) =>
    noBody ? (attempt.attach(new DiscardSink(attempt)), target.end()) : attempt.attach(target);
  if (!call.detached) outgoing.writeHead(status, headers);
  feed(sink);
  return RESPONSE_ALREADY_SENT;
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
  const body = parts.method === 'HEAD' ? null : fallback.body;
  if (!call.detached) {
    const headers = { ...fallback.headers, [REQUEST_ID_HEADER]: parts.input.requestId };
    sendWhole(parts.input.outgoing!.writeHead(fallback.status, headers), body, parts.upstream);
  }
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
  const headers = setRequestId([...leaderHeaders, 'x-coalesced', 'true'], input.requestId);
  const body = input.method === 'HEAD' || NO_BODY_STATUSES.has(status) ? null : leaderBody;
  const outgoing = input.outgoing!;
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

/** Body errors raised by undici for the node's side: reset or closed socket, body timeout, short body, bad framing. */
const NODE_BODY_ERRORS = new Set([
  'UND_ERR_SOCKET',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'ECONNRESET',
]);

function isNodeBodyError(error: { code?: string }): boolean {
  return error.code !== undefined && (NODE_BODY_ERRORS.has(error.code) || error.code.startsWith('HPE_')); // HPE_*: llhttp parse errors
}

/** Where a forwarded body goes: the caller's Node response (or a web stream), then the verdict. */
class ForwardSink implements BodySink {
  private resumeFn: (() => void) | null = null;
  private over = false;
  /** `send_timeout_ms` on the caller's Node response (the web path has no socket to cut). */
  private watch: SendWatch | null = null;

  constructor(
    private readonly logger: Logger,
    private readonly call: ProxyCall,
    private readonly node: ProxyNode,
    private readonly judge: boolean,
    /** The answer's kind, recorded when its body ends (unless the node breaks it: a failure). */
    private readonly outcome: Classified,
    private readonly keep: StaleCapture | null,
    private readonly flight: Flight | null,
    /** When the attempt was dispatched: its outcome's duration runs to the end of the body. */
    private readonly startedAt: number,
    /** The caller's Node response, which `send_timeout_ms` watches. */
    private readonly outgoing: ServerResponse,
  ) {}

  /** Bytes wait for the caller: `send_timeout_ms` runs (the watch is made on the first stall only: most answers never stall). */
  private stalled(outgoing: ServerResponse): void {
    if (this.watch === null) {
      this.watch = new SendWatch(outgoing, this.call.parts.upstream.config.send_timeout_ms, () => this.sendTimedOut());
      outgoing.once('close', () => this.callerClosed()); // after ProxyCall's own 'close' listener
    }
    this.watch.stalled();
  }

  /**
   * A stalled caller's connection closed (it left, or was cut off). A leader that followers
   * still wait on is detached by now and reads on for them: the node's body, paused for the
   * leader, is resumed (no 'drain' comes from a closed response).
   */
  private callerClosed(): void {
    this.watch?.settled();
    if (this.call.detached) this.resume();
  }

  write(chunk: Buffer, resume: () => void): boolean {
    this.keep?.chunk(chunk);
    this.flight?.chunk(chunk);
    if (this.call.detached) {
      // Read on for the followers only; once they no longer wait on this body, stop it.
      if (this.flight === null || this.flight.settled) this.call.cancel(NOBODY_READS);
      return true;
    }
    const ok = this.outgoing.write(chunk);
    if (!ok) {
      this.resumeFn = resume;
      this.outgoing.once('drain', () => this.drained());
      this.stalled(this.outgoing);
    }
    return ok;
  }

  /** The caller took everything waiting: the clock stops and the node is read again. */
  private drained(): void {
    this.watch?.settled();
    this.resume();
  }

  resume(): void {
    const resume = this.resumeFn;
    this.resumeFn = null;
    resume?.();
  }

  end(): void {
    this.keep?.end();
    this.flight?.end();
    if (this.call.detached) this.outgoing.destroy();
    else this.endOutgoing(this.outgoing);
    this.close(true);
  }

  /** The node's body is over: the slot goes back now, and the watch stays on until the caller has taken the rest. */
  private endOutgoing(outgoing: ServerResponse): void {
    outgoing.end();
    if (outgoing.writableLength === 0) this.watch?.settled();
    else this.stalled(outgoing);
  }

  /**
   * The caller took nothing for `send_timeout_ms`: its connection is cut ('close' cancels the
   * node's body and frees the slot, as a hang-up does: nothing is counted against the node;
   * a leader with followers waiting reads on for them, `callerClosed`).
   */
  private sendTimedOut(): void {
    this.call.parts.upstream.sendTimedOut();
    cutOff(this.outgoing);
  }

  fail(error: Error & { code?: string }): void {
    const nodeFault = !this.call.done && isNodeBodyError(error);
    if (nodeFault) {
      this.logger.warn(
        {
          event: 'upstream_failed',
          upstream: this.call.parts.upstream.name,
          node: this.node.id,
          kind: 'body',
          err: error.message,
          request_id: this.call.parts.input.requestId,
        },
        `${this.node.circuit}: body failed`,
      );
    }
    this.flight?.release(); // a cut body is no answer to share: the followers call themselves
    this.watch?.settled();
    this.outgoing.destroy();
    this.close(!nodeFault);
  }

  private close(answered: boolean): void {
    if (this.over) return;
    this.over = true;
    this.call.end();
    if (this.judge) this.call.record(this.node, answered ? this.outcome : FAILURE, this.startedAt);
  }
}
