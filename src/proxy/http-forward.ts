import type { Logger } from 'pino';
import { Attempt, DiscardSink } from './attempt.js';
import type { Transport, Tried } from './failover.js';
import type { ProxyCall } from './proxy-call.js';
import type { UpstreamClient } from './upstream-client.js';
import type { ProxyNode } from './upstreams.js';

export interface HttpForwardDeps {
  readonly client: UpstreamClient;
  readonly clock: () => number;
  readonly logger: Logger;
}

/** HTTP forwarding as the failover core's transport: one undici dispatch per attempt. */
export function httpTransport(deps: HttpForwardDeps, call: ProxyCall): Transport<Attempt> {
  return new HttpTransport(deps, call);
}

/** One object per call, its methods on the prototype (no closures made per request). */
class HttpTransport implements Transport<Attempt> {
  readonly upstream: ProxyCall['parts']['upstream'];
  readonly method: string;

  constructor(
    private readonly deps: HttpForwardDeps,
    private readonly call: ProxyCall,
  ) {
    this.upstream = call.parts.upstream;
    this.method = call.parts.method;
  }

  attempt(node: ProxyNode, startedAt: number): Promise<Tried<Attempt>> {
    return attemptNode(this.deps, this.call, node, startedAt);
  }

  replayable(): boolean {
    const body = this.call.parts.body;
    return body === null || body.replayable;
  }

  discard(attempt: Attempt): void {
    attempt.attach(new DiscardSink(attempt));
  }
}

/** Send the call to one node; resolves with its head or why there is none. */
function attemptNode(
  deps: HttpForwardDeps,
  call: ProxyCall,
  node: ProxyNode,
  startedAt: number,
): Promise<Tried<Attempt>> {
  const { upstream, target, body } = call.parts;
  const cfg = upstream.config;
  return new Promise((resolve) => {
    const settle = (a: Attempt) => {
      if (a.failure === null) {
        resolve({ kind: 'answer', answer: a, failed: upstream.failureStatuses.has(a.status), startedAt: a.startedAt });
        return;
      }
      call.attemptOver();
      if (a.failure === 'caller_gone') return resolve({ kind: 'caller_gone' });
      deps.logger.warn(
        {
          event: 'upstream_failed',
          upstream: upstream.name,
          node: node.id,
          kind: a.failure,
          err: a.error?.message,
          request_id: call.parts.input.requestId,
        },
        `${node.circuit}: ${a.failure}`,
      );
      resolve({ kind: a.failure, startedAt: a.startedAt });
    };
    const a = new Attempt(
      cfg.request_timeout_ms,
      settle,
      () => call.done || body?.sourceError != null,
      startedAt,
      deps.clock,
    );
    call.attempting(a);
    deps.client.dispatch(
      {
        origin: node.origin,
        path: node.basePath + target.path,
        method: call.parts.method,
        headers: call.parts.headers,
        body: body?.attempt() ?? null,
        bodyTimeoutMs: cfg.request_timeout_ms,
      },
      a,
    );
  });
}
