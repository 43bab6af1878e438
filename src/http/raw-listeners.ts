import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { ProxyRoutes } from '../proxy/proxy-routes.js';
import { misdirected, type HostRule } from './request-guard.js';
import { endSocketWithProblem, writeProblem } from './problem.js';
import { logFailure, toAppError } from './request-failure.js';
import { incomingRequestId } from '../request-id.js';

/** node:http's 'request' listener for `/proxy/*`, bypassing Hono. */
export type RequestListener = (incoming: IncomingMessage, outgoing: ServerResponse) => void;
/** node:http's 'upgrade' listener (WebSocket pass-through under /proxy). */
export type UpgradeListener = (incoming: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface RawListenerDeps {
  readonly proxy: ProxyRoutes;
  readonly hosts: HostRule | null;
  readonly logger: Logger;
  readonly clock: () => number;
}

/** The path of a request target, for problems and logs. */
const pathOf = (target: string | undefined): string => (target ?? '/').split('?')[0] ?? '/';

/**
 * `/proxy/*` straight from Node's request and response, skipping @hono/node-server's Request
 * and Context (about a sixth of a proxied request's cost). It applies the Host check itself
 * (the Hono middleware does not run here) and answers a failure as the app would.
 */
export function rawProxyListener(deps: RawListenerDeps): RequestListener {
  return (incoming, outgoing) => {
    const method = incoming.method ?? 'GET';
    const target = incoming.url ?? '/';
    const requestId = incomingRequestId(incoming);
    const wrongHost = misdirected(deps.hosts, incoming.headers.host);
    const handled = wrongHost
      ? Promise.reject(wrongHost)
      : deps.proxy.handler({ method, requestId, incoming, outgoing });
    handled.catch((thrown: unknown) => {
      const error = toAppError(thrown);
      const path = pathOf(target);
      logFailure(deps.logger, method, path, error, requestId);
      if (outgoing.headersSent) {
        outgoing.destroy();
        return;
      }
      writeProblem(outgoing, error, path, requestId, deps.clock());
    });
  };
}

/** The 'upgrade' listener: WebSocket handshakes under /proxy, refused as a raw HTTP/1.1 problem. */
export function rawUpgradeListener(deps: RawListenerDeps): UpgradeListener {
  return (incoming, socket, head) => {
    socket.on('error', () => {}); // a caller resetting its tunnel is no error of ours
    const requestId = incomingRequestId(incoming);
    const wrongHost = misdirected(deps.hosts, incoming.headers.host);
    const handled = wrongHost ? Promise.reject(wrongHost) : deps.proxy.upgrade(incoming, socket, head, requestId);
    handled.catch((thrown: unknown) => {
      const error = toAppError(thrown);
      const path = pathOf(incoming.url);
      logFailure(deps.logger, incoming.method ?? 'GET', path, error, requestId);
      endSocketWithProblem(socket, error, path, requestId, deps.clock());
    });
  };
}
