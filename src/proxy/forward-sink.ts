import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { BodySink } from './attempt.js';
import type { Flight } from './coalesce.js';
import { recordNode, type FailoverDeps } from './failover.js';
import type { ProxyCall } from './proxy-call.js';
import { NOBODY_READS } from './proxy-errors.js';
import type { StaleCapture } from './stale-cache.js';
import type { ProxyNode } from './upstreams.js';

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
export class ForwardSink implements BodySink {
  outgoing: ServerResponse | null = null;
  web: Readable | null = null;
  private resumeFn: (() => void) | null = null;
  private over = false;

  constructor(
    private readonly deps: FailoverDeps & { readonly logger: Logger },
    private readonly call: ProxyCall,
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
      if (this.flight === null || this.flight.settled) this.call.cancel(NOBODY_READS);
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
      this.deps.logger.warn(
        {
          event: 'upstream_failed',
          upstream: this.call.parts.upstream.name,
          node: this.node.id,
          kind: 'body',
          err: error.message,
        },
        `${this.node.circuit}: body failed`,
      );
    }
    this.flight?.release(); // a cut body is no answer to share: the followers call themselves
    if (this.outgoing !== null) this.outgoing.destroy();
    else this.web?.destroy(error);
    this.close(!nodeFault);
  }

  private close(success: boolean): void {
    if (this.over) return;
    this.over = true;
    this.call.end();
    if (this.judge) recordNode(this.deps, this.call.parts.upstream, this.node, success, this.startedAt);
  }
}
