import { once } from 'node:events';
import type http from 'node:http';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach } from 'vitest';
import type { AppDeps } from '../../src/app.js';
import { AppError } from '../../src/domain/errors.js';
import { serveApp, type Served } from '../../src/server/node-server.js';
import type { CircuitStore } from '../../src/store/circuit-store.js';
import { buildApp, memoryStore, silentLogger } from '../helper.js';

/**
 * A node:http server on 127.0.0.1, port 0, serving `built` as `src/main.ts` does
 * (`serveApp`): `/proxy/` and WebSocket upgrades through the raw proxy listeners, the
 * closed-circuit `GET /allowed` through its fast path, the rest through @hono/node-server.
 */
export async function listenAsMain(built: {
  readonly app: { readonly fetch: Served['fetch'] };
  readonly proxyListener?: Served['proxyListener'];
  readonly allowedListener?: Served['allowedListener'];
  readonly upgradeListener?: Served['upgradeListener'];
}): Promise<http.Server> {
  const server = createServer();
  const { proxyListener, allowedListener, upgradeListener } = built;
  serveApp(server, { fetch: built.app.fetch, proxyListener, allowedListener, upgradeListener }, silentLogger);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

/** A logger that keeps every line (debug and up) as parsed JSON. */
export function capturingLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'debug' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  return { logger, lines };
}

/**
 * The app served as `src/main.ts` serves it (`listenAsMain`), so requests reach it with
 * their raw request target (fetch and `app.request()` normalise paths).
 * Closed after each test, or after the file's tests with `'all'`.
 */
export function useServedApp(closeAfter: 'each' | 'all' = 'each') {
  const servers: http.Server[] = [];
  (closeAfter === 'each' ? afterEach : afterAll)(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
  return async (overrides: Partial<AppDeps> = {}) => {
    const built = buildApp(overrides);
    const server = await listenAsMain(built);
    servers.push(server);
    return {
      ...built,
      server,
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      port: (server.address() as AddressInfo).port,
    };
  };
}

/**
 * An in-memory store that, while `busy` is set, fails every call the way the SQLite
 * store does when the database stays locked past its busy timeout.
 */
export function switchableBusyStore() {
  const { db, store } = memoryStore();
  const state = { busy: false };
  const wrapped = new Proxy(store, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (state.busy)
          throw new AppError('STORAGE_BUSY', 'The database is busy; try again shortly.', { retryAfterSeconds: 1 });
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { db, store: wrapped as CircuitStore, state };
}

/** One request whose path is sent exactly as given (fetch would normalise it); the body is read. */
export function rawRequest(
  url: string,
  method: string,
  path: string,
  headers: http.OutgoingHttpHeaders = {},
  body?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
