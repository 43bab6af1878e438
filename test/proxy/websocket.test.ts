import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { FaultNode } from '../faults/fault-node.js';
import { startNodes } from './fake-node.js';
import { rawRequest, startProxyApp, type ProxyApp } from './proxy-app.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const clean of cleanups.splice(0).reverse()) await clean();
});

/** A WebSocket node on 127.0.0.1 that echoes every message; `onMessage` may override. */
async function wsNode(
  id: string,
  options: { onMessage?: (ws: WebSocket, data: Buffer) => void; reject?: number } = {},
) {
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    verifyClient: options.reject === undefined ? undefined : (_info, done) => done(false, options.reject),
  });
  await once(wss, 'listening');
  wss.on('connection', (ws) =>
    ws.on('message', (data: Buffer) => (options.onMessage ?? ((s, d) => s.send(d)))(ws, data)),
  );
  cleanups.push(() => {
    for (const c of wss.clients) c.terminate();
    return new Promise((resolve) => wss.close(resolve));
  });
  return { id, url: `http://127.0.0.1:${(wss.address() as AddressInfo).port}`, wss };
}

async function proxyOver(nodes: Record<string, { id: string; url: string }>, extra = ''): Promise<ProxyApp> {
  const app = await startProxyApp(nodes, `health_check: { enabled: false }\n${extra}`);
  cleanups.push(() => app.close());
  return app;
}

/** A client connected through the proxy, with the proxy's 101 head. */
async function connect(app: ProxyApp, path = '/proxy/users/chat') {
  const ws = new WebSocket(`${app.url.replace('http', 'ws')}${path}`);
  cleanups.push(() => ws.terminate());
  const upgraded = once(ws, 'upgrade') as Promise<[import('node:http').IncomingMessage]>;
  const opened = once(ws, 'open'); // emitted in the same tick as 'upgrade'
  const [[res]] = await Promise.all([upgraded, opened]);
  return { ws, res };
}

describe('WebSocket pass-through', () => {
  it('echoes through the proxy and marks the handshake with the node', async () => {
    const node = await wsNode('dc1-1');
    const app = await proxyOver({ 'dc1-1': node });
    const { ws, res } = await connect(app);
    expect(res.headers['x-node']).toBe('dc1-1');
    ws.send('hello');
    const [data] = await once(ws, 'message');
    expect(String(data)).toBe('hello');
    expect(await app.breaker.get('users/dc1-1')).toMatchObject({ state: 'closed', failureCount: 0 });
  });

  it('fails over past a refused node, counting a failure on its circuit', async () => {
    const refused = await new FaultNode('dc1-1', 'refuse').start();
    cleanups.push(() => refused.stop());
    const node = await wsNode('dc1-2');
    const app = await proxyOver({ 'dc1-1': refused, 'dc1-2': node }, 'retries: 0');
    const { ws, res } = await connect(app); // round-robin starts at dc1-1
    expect(res.headers['x-node']).toBe('dc1-2');
    ws.send('m');
    expect(String((await once(ws, 'message'))[0])).toBe('m');
    expect((await app.breaker.get('users/dc1-1'))?.failureCount).toBe(1);
    expect((await app.breaker.get('users/dc1-2'))?.failureCount).toBe(0);
  });

  it('fails over on a status in failure_statuses and on a handshake timeout, within the retry budget', async () => {
    const failing = await wsNode('dc1-1', { reject: 503 });
    const hanging = await new FaultNode('dc1-2', 'hang').start();
    cleanups.push(() => hanging.stop());
    const good = await wsNode('dc2-1');
    const app = await proxyOver(
      { 'dc1-1': failing, 'dc1-2': hanging, 'dc2-1': good },
      'retries: 2\nrequest_timeout_ms: 300',
    );
    const { ws, res } = await connect(app);
    expect(res.headers['x-node']).toBe('dc2-1');
    expect(res.headers['x-degraded']).toBe('true');
    ws.send('m');
    expect(String((await once(ws, 'message'))[0])).toBe('m');
    expect((await app.breaker.get('users/dc1-1'))?.failureCount).toBe(1);
    expect((await app.breaker.get('users/dc1-2'))?.failureCount).toBe(1);
  });

  it('passes the last failing answer back as sent when the retry budget is spent', async () => {
    const failing = await wsNode('dc1-1', { reject: 503 });
    const app = await proxyOver({ 'dc1-1': failing }, 'retries: 0');
    const res = await rawRequest(app.url, 'GET', '/proxy/users/chat', {
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
    });
    expect(res.status).toBe(503);
    expect(res.headers['x-node']).toBe('dc1-1');
    expect((await app.breaker.get('users/dc1-1'))?.failureCount).toBe(1);
  });

  it('closes the client when the node closes mid-stream', async () => {
    const node = await wsNode('dc1-1', { onMessage: (ws) => ws.terminate() });
    const app = await proxyOver({ 'dc1-1': node });
    const { ws } = await connect(app);
    const closed = once(ws, 'close');
    ws.send('bye');
    const [code] = await closed;
    expect(code).toBe(1006); // abnormal closure: the connection went away without a close frame
  });

  it('passes a non-101 answer back as sent', async () => {
    const node = await wsNode('dc1-1', { reject: 403 });
    const app = await proxyOver({ 'dc1-1': node });
    const ws = new WebSocket(`${app.url.replace('http', 'ws')}/proxy/users/chat`);
    cleanups.push(() => ws.terminate());
    ws.on('error', () => {});
    const [, res] = (await once(ws, 'unexpected-response')) as [unknown, import('node:http').IncomingMessage];
    expect(res.statusCode).toBe(403);
    expect(res.headers['x-node']).toBe('dc1-1');
    expect((await app.breaker.get('users/dc1-1'))?.failureCount).toBe(0);
  });

  it('answers a WebSocket upgrade outside /proxy/ with a 501 problem', async () => {
    const { 'dc1-1': node } = await startNodes('dc1-1');
    cleanups.push(() => node!.stop());
    const app = await proxyOver({ 'dc1-1': node! });
    const res = await rawRequest(app.url, 'GET', '/health', {
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
    });
    expect(res.status).toBe(501);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(res.body).code).toBe('UPGRADE_NOT_SUPPORTED');
  });

  it('counts an open tunnel in the bulkhead', async () => {
    const node = await wsNode('dc1-1');
    const app = await proxyOver({ 'dc1-1': node }, 'max_concurrent: 1');
    const { ws } = await connect(app);
    const busy = await app.get('/proxy/users/x');
    expect(busy.res.status).toBe(503);
    expect(JSON.parse(busy.text).code).toBe('BULKHEAD_FULL');
    ws.close();
    await once(ws, 'close');
    const again = await connect(app); // the slot came back with the tunnel's close
    again.ws.send('x');
    expect(String((await once(again.ws, 'message'))[0])).toBe('x');
  });
});
