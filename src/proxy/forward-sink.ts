import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { BreakerService } from '../service/breaker-service.js';
import { elapsedMs, type Attempt, type BodySink } from './attempt.js';
import type { Flight } from './coalesce.js';
import type { HeaderRecord } from './forward-headers.js';
import { recordRequestOutcome } from './node-outcomes.js';
import type { ProxyInput } from './proxy-handler.js';
import type { ReplayableBody } from './replayable-body.js';
import type { StaleCapture } from './stale-cache.js';
import type { ProxyTarget } from './target-path.js';
import type { ProxyNode, Upstream } from './upstreams.js';

/** One proxied request on its way through `forward`. */
export interface Call {
  readonly input: ProxyInput;
  readonly upstream: Upstream;
  readonly target: ProxyTarget;
  readonly method: string;
  readonly requestHeaders: HeaderRecord;
  readonly headers: Record<string, string | string[]>;
  readonly body: ReplayableBody | null;
  /** The attempt in progress (its head pending, or its body streaming to the caller). */
  current: Attempt | null;
  /** Hands the bulkhead slot to the response body; true once handed over. */
  handedOff: boolean;
  /** The caller's response is over (sent, or the caller left). */
  done: boolean;
  /** When this request leads a coalesced call: the followers waiting on it. */
  flight: Flight | null;
  /** The leader hung up while followers wait: the answer is still read, for them only. */
  detached: boolean;
  /** Sent while the upstream is in panic (guard-rails.ts): answers carry `X-Degraded: panic`. */
  panic?: boolean;
  /** The node answering is forced closed and its rules would have refused (detect-only): `X-Circuit-Would-Refuse: true`. */
  wouldRefuse?: boolean;
}

/** Body errors raised by undici for the node's side: reset or closed socket, body timeout, short body, bad framing. */
const NODE_BODY_ERRORS = new Set(['UND_ERR_SOCKET', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'ECONNRESET']);

function isNodeBodyError(error: { code?: string }): boolean {
  return error.code !== undefined && (NODE_BODY_ERRORS.has(error.code) || error.code.startsWith('HPE_')); // HPE_*: llhttp parse errors
}

const NOBODY_READS = Object.assign(new Error('the leader left and no follower waits'), { code: 'CIRCUITLOG_CALLER_GONE' });

/** Where a forwarded body goes: the caller's Node response (or a web stream), then the verdict. */
export class ForwardSink implements BodySink {
  outgoing: ServerResponse | null = null;
  web: Readable | null = null;
  private resumeFn: (() => void) | null = null;
  private over = false;

  constructor(
    private readonly deps: { readonly breaker: BreakerService; readonly logger: Logger; readonly clock: () => number },
    private readonly call: Call,
    private readonly node: ProxyNode,
    private readonly judge: boolean,
    private readonly keep: StaleCapture | null,
    private readonly flight: Flight | null,
    /** When the attempt was dispatched: its outcome's duration runs to the end of the body. */
    private readonly startedAt: number,
  ) {}

  write(chunk: Buffer, resume: () => void): boolean {
    this.keep?.chunk(chunk);
    this.flight?.chunk(chunk);
    if (this.call.detached) {
      // Read on for the followers only; once they no longer wait on this body, stop it.
      if (this.flight === null || this.flight.settled) this.call.current?.cancel('caller_gone', NOBODY_READS);
      return true;
    }
    const ok = this.outgoing !== null ? this.outgoing.write(chunk) : this.web === null || this.web.push(chunk);
    if (!ok) {
      this.resumeFn = resume;
      this.outgoing?.once('drain', resume);
    }
    return ok;
  }

  resume(): void {
    const resume = this.resumeFn;
    this.resumeFn = null;
    resume?.();
  }

  end(): void {
    this.keep?.end();
    this.flight?.end();
    if (this.call.detached) this.outgoing?.destroy();
    else if (this.outgoing !== null) this.outgoing.end();
    else this.web?.push(null);
    this.close(true);
  }

  fail(error: Error & { code?: string }): void {
    const nodeFault = !this.call.done && isNodeBodyError(error);
    if (nodeFault) {
      this.deps.logger.warn({ event: 'upstream_failed', upstream: this.call.upstream.name, node: this.node.id, kind: 'body', err: error.message }, `${this.node.circuit}: body failed`);
    }
    this.flight?.release(); // a cut body is no answer to share: the followers call themselves
    if (this.outgoing !== null) this.outgoing.destroy();
    else this.web?.destroy(error);
    this.close(!nodeFault);
  }

  private close(success: boolean): void {
    if (this.over) return;
    this.over = true;
    const call = this.call;
    call.done = true;
    call.current = null;
    call.upstream.inFlight--;
    if (this.judge) recordRequestOutcome(this.deps.breaker, call.upstream, this.node, success, elapsedMs(this.deps.clock, this.startedAt));
  }
}
