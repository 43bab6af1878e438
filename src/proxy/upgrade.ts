import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import type { BreakerService } from '../service/breaker-service.js';
import { recordRequestOutcome } from './node-outcomes.js';
import { upstreamRequestHeaders } from './forward-headers.js';
import type { ProxyHooks } from './proxy-hooks.js';
import { parseProxyTarget, type ProxyTarget } from './target-path.js';
import { isNothingSent } from './upstream-client.js';
import { unknownUpstream } from './unknown-upstream.js';
import { offersWebSocket, serveWithoutUpgrade } from './ignore-upgrade.js';
import { isPromise } from '../store/maybe-promise.js';
import { pickNode, type ProxyNode, type Upstream } from './upstreams.js';

export interface UpgradeDeps {
  readonly upstreams: ReadonlyMap<string, Upstream>;
  readonly breaker: BreakerService;
  readonly logger: Logger;
  readonly localDc: string;
  /** On a storage outage, tunnel to the local DC's nodes without their breakers (else 503). */
  readonly failOpen?: boolean;
  /** Each upgrade attempt is counted as a proxied request (status 101, or what was sent instead). */
  readonly hooks?: ProxyHooks;
}

/** For the hooks: the upstream (once known), the node whose answer was relayed, the status sent. */
interface UpgradeReport {
  upstream?: string;
  node: ProxyNode | null;
  status: number;
}

/** Handles node:http's 'upgrade' event; throws an AppError for the caller to render. */
export type UpgradeHandler = (incoming: http.IncomingMessage, socket: Duplex, head: Buffer) => Promise<void>;

type Handshake =
  | { readonly kind: 'upgraded'; readonly res: http.IncomingMessage; readonly socket: Socket; readonly head: Buffer }
  | { readonly kind: 'answer'; readonly res: http.IncomingMessage; readonly failed: boolean }
  | { readonly kind: 'timeout' | 'unreachable' | 'refused' | 'caller_gone' };

/** Hop-by-hop fields of a node's 101 answer other than the two the switch needs. */
const NOT_RELAYED = new Set(['keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'proxy-authenticate']);

/**
 * WebSocket pass-through under `/proxy/<upstream>/…` (issue 12): the node is chosen as for a
 * GET (local DC first, breaker check); a refused connection, a timeout or a status in
 * `failure_statuses` is a node failure and fails over like a GET; any other non-101 answer is
 * passed back as sent. Once switched, bytes flow both ways (with backpressure) until either
 * side closes; the tunnel holds a bulkhead slot while open. Only `Upgrade: websocket`; any
 * other offer (`h2c`) is declined and the request served as plain HTTP/1.1 (ignore-upgrade.ts).
 */
export function createUpgradeHandler(deps: UpgradeDeps): UpgradeHandler {
  const { breaker, logger } = deps;

  function handshake(upstream: Upstream, node: ProxyNode, target: ProxyTarget, incoming: http.IncomingMessage, client: Duplex): Promise<Handshake> {
    const url = new URL(node.origin);
    const headers = upstreamRequestHeaders(incoming.headers, { clientIp: incoming.socket.remoteAddress, proto: 'http', localDc: deps.localDc });
    headers.connection = 'Upgrade';
    headers.upgrade = 'websocket';
    const request = (url.protocol === 'https:' ? https : http).request({
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port || (url.protocol === 'https:' ? 443 : 80),
      path: node.basePath + target.path,
      method: 'GET',
      headers,
      agent: false, // a tunnel owns its connection
    });
    return new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: Handshake) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.off('close', onCallerGone);
        resolve(outcome);
      };
      const timer = setTimeout(() => {
        settle({ kind: 'timeout' });
        request.destroy();
      }, upstream.config.request_timeout_ms);
      const onCallerGone = () => {
        settle({ kind: 'caller_gone' });
        request.destroy();
      };
      client.once('close', onCallerGone);
      request.once('upgrade', (res, socket, head) => settle({ kind: 'upgraded', res, socket, head }));
      request.once('response', (res) => settle({ kind: 'answer', res, failed: upstream.failureStatuses.has(res.statusCode ?? 0) }));
      request.once('error', (error) => {
        if (!settled) logger.warn({ event: 'upstream_failed', upstream: upstream.name, node: node.id, kind: 'upgrade', err: error.message }, `${node.circuit}: upgrade failed`);
        settle({ kind: isNothingSent(error) ? 'refused' : 'unreachable' });
      });
      request.end();
    });
  }

  const hooks = deps.hooks;
  if (hooks === undefined) {
    return async (incoming, client, head) => {
      if (!offersWebSocket(incoming) && serveWithoutUpgrade(incoming, client, head)) return;
      await switchProtocols(incoming, client, head, null);
    };
  }
  return async (incoming, client, head) => {
    if (!offersWebSocket(incoming) && serveWithoutUpgrade(incoming, client, head)) return; // counted as the plain request it becomes
    const started = performance.now();
    const r: UpgradeReport = { node: null, status: 0 };
    try {
      await switchProtocols(incoming, client, head, r);
      if (r.upstream !== undefined) hooks.proxyRequest(r.upstream, r.node, r.status, performance.now() - started);
    } catch (error) {
      if (r.upstream !== undefined) hooks.proxyError(r.upstream, error, performance.now() - started); // the problem's status
      throw error;
    }
  };

  async function switchProtocols(incoming: http.IncomingMessage, client: Duplex, head: Buffer, r: UpgradeReport | null): Promise<void> {
    const upgrade = String(incoming.headers.upgrade ?? '').toLowerCase();
    const raw = incoming.url ?? '/';
    if (!raw.startsWith('/proxy/') || upgrade !== 'websocket' || incoming.method !== 'GET') {
      throw new AppError('UPGRADE_NOT_SUPPORTED', `Only 'Upgrade: websocket' GET requests under /proxy/<upstream>/ are switched; got '${upgrade.slice(0, 40)}'.`);
    }
    const target = parseProxyTarget(raw);
    const upstream = deps.upstreams.get(target.upstream);
    if (upstream === undefined) throw unknownUpstream(target.upstream, deps.upstreams);
    if (r !== null) r.upstream = upstream.name;
    const max = upstream.config.max_concurrent;
    if (max !== undefined && upstream.inFlight >= max) {
      throw new AppError('BULKHEAD_FULL', `'${upstream.name}' already has ${max} requests in flight.`, { retryAfterSeconds: 1 });
    }
    upstream.inFlight++;
    let holding = true; // the slot passes to the tunnel once it opens
    try {
      let tried: Set<ProxyNode> | null = null;
      let budget = upstream.config.retries;
      let last: { outcome: Handshake; node: ProxyNode } | null = null;
      for (;;) {
        const picked = pickNode(upstream, breaker, tried, deps.failOpen ?? true);
        const pick = isPromise(picked) ? await picked : picked;
        if (pick.node === null) {
          if (last === null) {
            throw new AppError('NO_NODE_AVAILABLE', `Every node of '${upstream.name}' has an open circuit; no node was contacted.`, pick.retryAt === null ? { retryAfterSeconds: 1 } : { retryAt: pick.retryAt });
          }
          return giveUp(upstream, last.outcome, last.node, client, r);
        }
        if (last?.outcome.kind === 'answer') last.outcome.res.resume();
        const outcome = await handshake(upstream, pick.node, target, incoming, client);
        if (outcome.kind === 'caller_gone') return report(r, null, 499); // as on the HTTP path: nothing was sent
        if (outcome.kind === 'upgraded') {
          recordRequestOutcome(breaker, upstream, pick.node, true, undefined);
          holding = false;
          tunnel(upstream, pick.node, outcome, client, head);
          return report(r, pick.node, 101);
        }
        if (outcome.kind === 'answer' && !outcome.failed) {
          recordRequestOutcome(breaker, upstream, pick.node, true, undefined);
          return relayAnswer(outcome.res, pick.node, client, r);
        }
        recordRequestOutcome(breaker, upstream, pick.node, false, undefined);
        (tried ??= new Set()).add(pick.node);
        last = { outcome, node: pick.node };
        if (outcome.kind === 'refused') continue; // nothing was sent: free to move on
        if (budget === 0) return giveUp(upstream, outcome, pick.node, client, r);
        budget--;
      }
    } finally {
      if (holding) upstream.inFlight--;
    }
  }
}

function report(r: UpgradeReport | null, node: ProxyNode | null, status: number): void {
  if (r === null) return;
  r.node = node;
  r.status = status;
}

function giveUp(upstream: Upstream, last: Handshake, node: ProxyNode, client: Duplex, r: UpgradeReport | null): void {
  switch (last.kind) {
    case 'answer':
      return relayAnswer(last.res, node, client, r); // a failure status goes back as sent
    case 'timeout':
      throw new AppError('UPSTREAM_TIMEOUT', `No node of '${upstream.name}' answered within ${upstream.config.request_timeout_ms} ms.`);
    default:
      throw new AppError('UPSTREAM_UNREACHABLE', `No node of '${upstream.name}' could be reached.`);
  }
}

function markers(node: ProxyNode): string {
  return `x-node: ${node.id}\r\nx-dc: ${node.dc}\r\nx-degraded: ${node.local ? 'false' : 'true'}\r\n`;
}

/** A non-101 answer, passed back as sent; the connection closes after it (it was an upgrade request). */
function relayAnswer(res: http.IncomingMessage, node: ProxyNode, client: Duplex, r: UpgradeReport | null): void {
  report(r, node, res.statusCode ?? 0);
  let head = `HTTP/1.1 ${res.statusCode} ${res.statusMessage ?? ''}\r\n`;
  for (let i = 0; i < res.rawHeaders.length; i += 2) {
    const name = res.rawHeaders[i]!.toLowerCase();
    if (name === 'connection' || name === 'upgrade' || NOT_RELAYED.has(name)) continue;
    head += `${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}\r\n`;
  }
  client.write(`${head}${markers(node)}connection: close\r\n\r\n`);
  res.pipe(client); // ends the caller's connection with the body (close-delimited when chunked)
  res.on('error', () => client.destroy());
}

/** The switched connection: the node's 101 head, then bytes both ways until either side closes. */
function tunnel(upstream: Upstream, node: ProxyNode, up: Extract<Handshake, { kind: 'upgraded' }>, client: Duplex, clientHead: Buffer): void {
  let head = `HTTP/1.1 101 ${up.res.statusMessage || 'Switching Protocols'}\r\n`;
  for (let i = 0; i < up.res.rawHeaders.length; i += 2) {
    if (!NOT_RELAYED.has(up.res.rawHeaders[i]!.toLowerCase())) head += `${up.res.rawHeaders[i]}: ${up.res.rawHeaders[i + 1]}\r\n`;
  }
  client.write(`${head}${markers(node)}\r\n`);
  const nodeSocket = up.socket;
  if (up.head.length > 0) client.write(up.head);
  if (clientHead.length > 0) nodeSocket.write(clientHead);
  let open = 2;
  const closed = () => {
    if (--open === 0) upstream.inFlight--;
  };
  for (const [from, to] of [
    [nodeSocket, client],
    [client, nodeSocket],
  ] as const) {
    from.pipe(to); // pipe pauses `from` while `to` is full: backpressure both ways
    from.on('error', () => to.destroy());
    from.once('close', () => {
      to.end(); // what was sent still arrives, then the other side closes too
      closed();
    });
  }
}
