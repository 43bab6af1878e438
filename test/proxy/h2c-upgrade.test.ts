import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startNodes, type FakeNode } from './fake-node.js';
import { rawRequest, startProxyApp, type ProxyApp } from './proxy-app.js';

/**
 * `Upgrade: h2c` (curl --http2, Java's HttpClient) is an offer, not a demand: with a proxy
 * configured it is declined and the request served as HTTP/1.1 (issue 15; RFC 9110 section
 * 7.8; nginx does the same), on proxied and other routes alike.
 */
let app: ProxyApp | null = null;
let node: FakeNode | undefined;

afterEach(async () => {
  await app?.close();
  await node?.stop();
  app = null;
});

async function setup(): Promise<ProxyApp> {
  node = (await startNodes('dc1-1'))['dc1-1']!;
  app = await startProxyApp({ 'dc1-1': node }, 'health_check: { enabled: false }');
  return app;
}

const H2C = { connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAARAAAAAAAIAAAAA' };

/** Raw bytes on one connection; resolves with everything the server sent once it closes. */
function exchange(proxy: ProxyApp, requests: string): Promise<string> {
  const { port } = new URL(proxy.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (data += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(data));
    socket.write(requests);
  });
}

describe('Upgrade: h2c', () => {
  it('is served as HTTP/1.1 on a proxied route, without the offer reaching the node', async () => {
    const proxy = await setup();
    const res = await rawRequest(proxy.url, 'GET', '/proxy/users/items', H2C);
    expect(res.status).toBe(200);
    expect(res.headers['x-node']).toBe('dc1-1');
    expect(JSON.parse(res.body)).toMatchObject({ node: 'dc1-1', url: '/items' });
    const seen = node!.seen[0]!.headers;
    expect(seen.upgrade).toBeUndefined();
    expect(seen['http2-settings']).toBeUndefined();
  });

  it('is served as HTTP/1.1 on a route outside the proxy', async () => {
    const proxy = await setup();
    const res = await rawRequest(proxy.url, 'GET', '/health', H2C);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toMatchObject({ status: 'ok' });
  });

  it('keeps the connection: a POST with its body, then a second request on the same socket', async () => {
    const proxy = await setup();
    const head =
      'Host: 127.0.0.1\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n';
    const raw = await exchange(
      proxy,
      `POST /proxy/users/echo HTTP/1.1\r\n${head}Content-Length: 5\r\n\r\nhello` +
        'GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n',
    );
    const statuses = [...raw.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]));
    expect(statuses).toEqual([200, 200]);
    expect(raw.toLowerCase()).toContain('x-body-bytes: 5');
    expect(raw).not.toContain('101 Switching');
  });
});
