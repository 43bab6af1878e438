import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { BreakerService, Clock } from '../service/breaker-service.js';
import { failover, type FailoverDeps } from './failover.js';
import { upstreamRequestHeaders } from './upstream-client.js';
import { offersWebSocket, serveWithoutUpgrade } from './ignore-upgrade.js';
import { noNodeAvailable, upgradeNotSupported, upstreamTimeout, upstreamUnreachable } from './proxy-errors.js';
import {
  admitTarget,
  ProxyCall,
  type ProxyHooks,
  type Report,
  report,
  reported,
  takeSlot,
  waitForSlot,
} from './proxy-call.js';
import { handshakeTransport } from './ws-handshake.js';
import { relayAnswer, tunnel } from './ws-tunnel.js';
import type { PanicWatches } from './node-picker.js';
import type { Upstream } from './upstreams.js';

/** One 'upgrade' event: the request, the caller's socket, the bytes after its head, and its id (request-id.ts). */
interface UpgradeRequest {
  readonly incoming: http.IncomingMessage;
  readonly client: Duplex;
  readonly head: Buffer;
  readonly requestId: string;
}

export interface UpgradeDeps {
  readonly upstreams: ReadonlyMap<string, Upstream>;
  readonly breaker: BreakerService;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly localDc: string;
  /** On a storage outage, tunnel to the local DC's nodes without their breakers (else 503). */
  readonly failOpen?: boolean;
  /** Each upgrade attempt is counted as a proxied request (status 101, or what was sent instead). */
  readonly hooks?: ProxyHooks;
  /** The upstreams' panic state, shared with the HTTP path (node-picker.ts); absent: never in panic. */
  readonly panics?: PanicWatches;
}

/** Handles node:http's 'upgrade' event (with the request's id, request-id.ts); throws an AppError for the caller to render. */
export type UpgradeHandler = (
  incoming: http.IncomingMessage,
  socket: Duplex,
  head: Buffer,
  requestId: string,
) => Promise<void>;

/**
 * WebSocket pass-through under `/proxy/<upstream>/…` (issue 12): the node is chosen and
 * failed over by the same core as a GET (local DC first, breaker check, retries); a refused
 * connection, a timeout or a failure status is a node failure, a 429 throttled (failover.ts
 * `answerKind`); any other non-101 answer is passed back as sent. Every handshake outcome is recorded with its
 * duration (dispatch to the node's answer). Once switched, bytes flow both ways until either
 * side closes; the tunnel holds a bulkhead slot while open. Only `Upgrade: websocket`; any
 * other offer (`h2c`) is declined and the request served as plain HTTP/1.1 (ignore-upgrade.ts).
 */
export function createUpgradeHandler(deps: UpgradeDeps): UpgradeHandler {
  const core: FailoverDeps = {
    breaker: deps.breaker,
    clock: deps.clock,
    failOpen: deps.failOpen ?? true,
    panics: deps.panics,
  };

  const hooks = deps.hooks;
  return async (incoming, client, head, requestId) => {
    if (!offersWebSocket(incoming) && serveWithoutUpgrade(incoming, client, head)) return; // counted as the plain request it becomes
    const request = { incoming, client, head, requestId };
    if (hooks === undefined) return switchProtocols(deps, core, request, null);
    await reported(
      hooks,
      (r) => switchProtocols(deps, core, request, r),
      () => 0,
    );
  };
}

/** One upgrade request: admit it, fail over to a node's handshake, then tunnel or relay its answer. */
async function switchProtocols(
  deps: UpgradeDeps,
  core: FailoverDeps,
  request: UpgradeRequest,
  r: Report | null,
): Promise<void> {
  const { incoming, client, head: clientHead, requestId } = request;
  const upgrade = String(incoming.headers.upgrade ?? '').toLowerCase();
  const raw = incoming.url ?? '/';
  if (!raw.startsWith('/proxy/') || upgrade !== 'websocket' || incoming.method !== 'GET')
    throw upgradeNotSupported(upgrade);
  const { target, upstream } = admitTarget(deps.upstreams, raw);
  if (r !== null) r.upstream = upstream.name;
  const headers = upstreamRequestHeaders(incoming.headers, {
    requestId,
    clientIp: incoming.socket.remoteAddress,
    proto: 'http',
    localDc: deps.localDc,
  });
  headers.connection = 'Upgrade';
  headers.upgrade = 'websocket';
  const slot = takeSlot(upstream) ?? (await waitForSlot(upstream, undefined));
  if (slot === null) return report(r, null, 499);
  const call = new ProxyCall(
    {
      input: { method: 'GET', requestId, incoming },
      upstream,
      target,
      method: 'GET',
      requestHeaders: incoming.headers,
      headers,
      body: null,
      flight: null,
      report: r,
    },
    slot,
    core,
  );
  try {
    const ending = await failover(core, handshakeTransport(call, client, deps.logger));
    call.observe(ending.kind === 'answer' || ending.kind === 'timeout' ? ending.kind : 'other');
    switch (ending.kind) {
      case 'caller_gone':
        return report(r, null, 499); // as on the HTTP path: nothing was sent
      case 'no_node':
        throw noNodeAvailable(upstream, ending.retryAt);
      case 'timeout':
        throw upstreamTimeout(upstream);
      case 'unreachable':
        throw upstreamUnreachable(upstream);
    }
    const { node, answer, use } = ending;
    if (!ending.recorded && use.judged) call.record(node, ending.outcome, ending.startedAt); // a failing or throttled answer was counted by the core
    if (answer.switched === null) {
      report(r, node, answer.res.statusCode ?? 0);
      return relayAnswer(upstream, answer.res, node, use, client, requestId); // a failure status goes back as sent, too
    }
    call.handOff(); // the slot is the tunnel's until both sides close
    tunnel(call, node, use, answer, client, clientHead);
    report(r, node, 101);
  } finally {
    call.settle();
  }
}
