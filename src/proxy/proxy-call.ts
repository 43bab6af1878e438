import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Slot } from './admission.js';
import type { Attempt } from './attempt.js';
import type { Flight } from './coalesce.js';
import type { HeaderRecord } from './forward-headers.js';
import { CALLER_GONE } from './proxy-errors.js';
import type { Report } from './proxy-report.js';
import type { ReplayableBody } from './replayable-body.js';
import type { ProxyTarget } from './target-path.js';
import type { Upstream } from './upstreams.js';

/** One request to proxy: from @hono/node-server or the fast path, `incoming`/`outgoing` are set; from `app.request()`, `raw`. */
export interface ProxyInput {
  readonly method: string;
  /** The full request URL (only read when `incoming` is absent). */
  readonly url: string;
  /** Its id (http/request-id.ts): on every answer and log line, and sent to the node. */
  readonly requestId: string;
  readonly raw?: Request;
  readonly incoming?: IncomingMessage;
  readonly outgoing?: ServerResponse;
}

/** What a call is made of, fixed at admission. */
export interface CallParts {
  readonly input: ProxyInput;
  readonly upstream: Upstream;
  readonly target: ProxyTarget;
  readonly method: string;
  /** The caller's fields; `headers` are the ones sent to the node. */
  readonly requestHeaders: HeaderRecord;
  readonly headers: Record<string, string | string[]>;
  readonly body: ReplayableBody | null;
  /** When this request leads a coalesced call: the followers waiting on it. */
  readonly flight: Flight | null;
  readonly report: Report | null;
}

/**
 * One proxied HTTP request from admission to the end of its answer. It owns its bulkhead
 * slot and gives it back in `end()` only: when `forward` is over without an answer being
 * streamed, or when the streamed body ends, fails or is cut.
 */
export class ProxyCall {
  /** The attempt in progress (its head pending, or its body streaming to the caller). */
  private current: Attempt | null = null;
  private handedOff = false;
  private over = false;
  private leaderGone = false;

  constructor(
    readonly parts: CallParts,
    private readonly slot: Slot,
  ) {
    // A caller that hangs up cancels the attempt in progress: before the head, the node's
    // work and the bulkhead slot are freed at once; either way it says nothing against the
    // node. A leader with followers waiting is only detached: its call goes on for them.
    parts.input.outgoing?.once('close', () => this.hangUp());
  }

  /** The caller's response is over (sent, or the caller left). */
  get done(): boolean {
    return this.over;
  }

  /** The leader hung up while followers wait: the answer is still read, for them only. */
  get detached(): boolean {
    return this.leaderGone;
  }

  /** An attempt starts: the upload's timer watches it. */
  attempting(attempt: Attempt): void {
    this.current = attempt;
    if (this.parts.body !== null) this.parts.body.watcher = attempt; // the node's timer runs only while the upload waits on it
  }

  /** The attempt in progress failed before its head. */
  attemptOver(): void {
    this.current = null;
    if (this.parts.body !== null) this.parts.body.watcher = null;
  }

  /** Stop the attempt in progress (the caller left, or no one reads its body any more). */
  cancel(reason: Error): void {
    this.current?.cancel('caller_gone', reason);
  }

  /** How the failover ended, for an adaptive concurrency limit: the node's head came, it timed out, or neither. */
  observe(ending: 'answer' | 'timeout' | 'other'): void {
    this.slot.observe(ending === 'answer' ? 'answered' : ending === 'timeout' ? 'dropped' : 'unjudged');
  }

  /** The node's answer is being streamed: the slot is the response body's until `end()`. */
  handOff(): void {
    this.handedOff = true;
  }

  /** After `forward`: a call whose answer was not handed off is over now. */
  settle(): void {
    if (!this.handedOff) this.end();
  }

  /** The call is over: the one place its bulkhead slot is released. */
  end(): void {
    this.over = true;
    this.current = null;
    this.slot.release();
  }

  private hangUp(): void {
    if (this.over) return;
    const flight = this.parts.flight;
    if (flight !== null && flight.followers > 0 && !flight.settled) {
      this.leaderGone = true;
      return;
    }
    this.over = true;
    this.cancel(CALLER_GONE);
  }
}
