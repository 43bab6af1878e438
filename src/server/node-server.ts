import http from 'node:http';
import net from 'node:net';
import { getRequestListener } from '@hono/node-server';
import type { Logger } from 'pino';
import type { ServerConfig } from '../config.js';
import type { FastListener } from '../http/raw-allowed.js';
import type { RequestListener, UpgradeListener } from '../http/raw-listeners.js';
import type { Readiness } from '../http/service-routes.js';
import { rejectConnect } from './connect.js';
import { adapterErrorHandler } from './request-error.js';
import { serverTimeoutOptions } from './timeouts.js';

/** What the node:http server serves: the app's fetch, and the raw proxy listeners when a proxy is configured. */
export interface Served {
  readonly fetch: (request: Request) => Response | Promise<Response>;
  readonly proxyListener?: RequestListener;
  /** Answers what it can (the closed-circuit `GET /allowed`) before @hono/node-server; false: not taken. */
  readonly allowedListener?: FastListener;
  readonly upgradeListener?: UpgradeListener;
}

/**
 * Answers whose headers are written while draining say `Connection: close` (RFC 9112
 * section 9.6), the ones in flight at SIGTERM included, and their connection ends after them:
 * a keep-alive client learns from the answer that the connection is done, so no request of
 * its is ever sent on a connection the server is closing. A check per answer, no listener.
 */
function drainAwareResponse(readiness: Readiness): typeof http.ServerResponse {
  return class DrainAwareResponse<
    Request extends http.IncomingMessage = http.IncomingMessage,
  > extends http.ServerResponse<Request> {
    override writeHead(statusCode: number, a?: unknown, b?: unknown): this {
      if (readiness.draining) this.shouldKeepAlive = false;
      // Passed on as given (no rest array, no Reflect.apply: this runs once per answer).
      return (super.writeHead as (s: number, a?: unknown, b?: unknown) => this)(statusCode, a, b);
    }
  };
}

/** The node:http server with the configured timeouts; CONNECT is answered 405 (see connect.ts). */
export function createNodeServer(config: ServerConfig, logger: Logger, readiness: Readiness): http.Server {
  const server = http.createServer({ ...serverTimeoutOptions(config), ServerResponse: drainAwareResponse(readiness) });
  server.on('connect', rejectConnect(logger, Date.now));
  return server;
}

/**
 * Attach the app: `/proxy/` to the raw proxy listener (when there is one), a closed circuit's
 * `GET /allowed` to the raw allowed listener, everything else through @hono/node-server;
 * WebSocket upgrades to the upgrade listener. While draining every answer says
 * `Connection: close` (createNodeServer), moving keep-alive callers off as Envoy drains.
 */
export function serveApp(server: http.Server, served: Served, logger: Logger): void {
  const honoListener = getRequestListener(served.fetch, { errorHandler: adapterErrorHandler(logger, Date.now) });
  const { proxyListener, allowedListener, upgradeListener } = served;
  server.on('request', (incoming, outgoing) => {
    if (proxyListener !== undefined && incoming.url?.startsWith('/proxy/')) proxyListener(incoming, outgoing);
    else if (allowedListener === undefined || !allowedListener(incoming, outgoing))
      void honoListener(incoming, outgoing);
  });
  if (upgradeListener !== undefined) server.on('upgrade', upgradeListener);
}

export interface DrainOptions {
  readonly logger: Logger;
  /** How long in-flight requests may take before their connections are closed. */
  readonly graceMs: number;
  /** Stop the singleton jobs and end the event streams (they never end by themselves). */
  readonly stopJobs: () => void;
  /** Close what the server used (the proxy's connection pools, the store), then the process ends. */
  readonly closeResources: () => Promise<void>;
  readonly onStopped: () => void;
}

/**
 * After SIGTERM and the delay: stop taking connections, let in-flight requests finish (up to
 * the grace), then stop. An idle keep-alive connection is not closed here: its client may be
 * sending a request on it this very moment, which a close would meet with a reset. Its next
 * request is answered with `Connection: close`, and one left unused closes after
 * `server.keep_alive_timeout_ms` (announced in `Keep-Alive: timeout=`), or at the grace.
 */
export function drain(server: http.Server, signal: string, options: DrainOptions): void {
  const { logger } = options;
  logger.info({ event: 'shutdown', signal }, 'draining in-flight requests');
  options.stopJobs();
  const timer = setTimeout(() => {
    logger.warn({ event: 'shutdown_timeout' }, 'grace period over; closing connections');
    server.closeAllConnections();
  }, options.graceMs);
  timer.unref();
  // Not http.Server#close(): since Node 19 it also destroys the idle keep-alive connections.
  net.Server.prototype.close.call(server, () => {
    void options.closeResources().finally(() => {
      logger.info({ event: 'stopped' }, 'stopped');
      options.onStopped();
    });
  });
}
