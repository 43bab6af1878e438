import { afterEach } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { AppDeps } from '../../src/app.js';
import { parseConfigText } from '../../src/config.js';
import { createHealthChecker } from '../../src/proxy/health-checker.js';
import type { ProxyOptions } from '../../src/proxy/proxy-routes.js';
import { createUndiciClient, type UpstreamClient } from '../../src/proxy/upstream-client.js';
import { buildApp, silentLogger } from '../helper.js';
import { listenAsMain } from '../http/served-app.js';
import { proxyYaml, startNodes, type FakeNode } from './fake-node.js';

/**
 * The app with a proxy over `nodes`, on a fake clock and an in-memory store, served on
 * 127.0.0.1, port 0, as `src/main.ts` serves it (the raw proxy listeners).
 */
export async function startProxyApp(
  nodes: Record<string, { readonly id: string; readonly url: string }>,
  extraYaml = '',
  client: UpstreamClient = createUndiciClient(),
  hooks: Pick<ProxyOptions, 'onCoalesced' | 'instanceId'> = {},
  /** More of the app's deps (e.g. `random`, the ramp's draw). */
  deps: Partial<AppDeps> = {},
) {
  const config = parseConfigText(proxyYaml(nodes, extraYaml), 'test');
  const proxy = { localDc: config.local_dc!, upstreams: config.upstreams, client, ...hooks };
  const built = buildApp({ ...deps, proxy });
  const server = await listenAsMain(built);
  let requests = 0;
  server.on('request', () => requests++);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const health = createHealthChecker({ ...proxy, breaker: built.breaker, logger: silentLogger });
  return {
    ...built,
    url,
    health,
    /** Requests the proxy's server has received so far. */
    get requests() {
      return requests;
    },
    /** A GET through the proxy; the body is read. */
    async get(path: string, init: RequestInit = {}) {
      const res = await fetch(`${url}${path}`, init);
      return { res, text: await res.text() };
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await client.close();
    },
  };
}

/** A raw HTTP request whose path is sent exactly as given (fetch would normalise it). */
export function rawRequest(
  url: string,
  method: string,
  path: string,
  headers: http.OutgoingHttpHeaders = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname, port, method, path, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

export type ProxyApp = Awaited<ReturnType<typeof startProxyApp>>;

/**
 * Fake nodes and a proxy app over them, stopped after each test. `start` replaces both;
 * `nodes` are the current ones, by id.
 */
export function useProxyFixture() {
  let proxy: ProxyApp | null = null;
  const fixture = {
    nodes: {} as Record<string, FakeNode>,
    async start(ids: string[], extraYaml: string): Promise<ProxyApp> {
      fixture.nodes = await startNodes(...ids);
      proxy = await startProxyApp(fixture.nodes, extraYaml);
      return proxy;
    },
  };
  afterEach(async () => {
    await proxy?.close();
    await Promise.all(Object.values(fixture.nodes).map((n) => n.stop()));
    proxy = null;
  });
  return fixture;
}

/** Poll until `condition` holds (no time bound of its own: the test's timeout is the limit). */
export async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 5));
}
