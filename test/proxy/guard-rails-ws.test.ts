import { once } from 'node:events';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { startProxyApp, type ProxyApp } from './proxy-app.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const clean of cleanups.splice(0).reverse()) await clean();
});

/** An echoing WebSocket node on 127.0.0.1. */
async function wsNode(id: string) {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(wss, 'listening');
  wss.on('connection', (ws) => ws.on('message', (data: Buffer) => ws.send(data)));
  cleanups.push(() => {
    for (const c of wss.clients) c.terminate();
    return new Promise((resolve) => wss.close(resolve));
  });
  return { id, url: `http://127.0.0.1:${(wss.address() as AddressInfo).port}` };
}

async function proxyOver(ids: string[], extra: string): Promise<ProxyApp> {
  const nodes = Object.fromEntries(await Promise.all(ids.map(async (id) => [id, await wsNode(id)] as const)));
  const app = await startProxyApp(nodes, `health_check: { enabled: false }\n${extra}`);
  cleanups.push(() => app.close());
  return app;
}

async function connect(app: ProxyApp): Promise<{ ws: WebSocket; res: IncomingMessage }> {
  const ws = new WebSocket(`${app.url.replace('http', 'ws')}/proxy/users/chat`);
  cleanups.push(() => ws.terminate());
  const [[res]] = (await Promise.all([once(ws, 'upgrade'), once(ws, 'open')])) as [[IncomingMessage], unknown];
  return { ws, res };
}

async function echoes(ws: WebSocket): Promise<string> {
  ws.send('ping');
  return String((await once(ws, 'message'))[0]);
}

describe('guard rails on the WebSocket path (the same failover core)', () => {
  it('tunnels to a node against its breaker in panic, the 101 head saying X-Degraded: panic', async () => {
    const app = await proxyOver(['dc1-1', 'dc1-2'], 'failure_threshold: 1\npanic_threshold_percent: 50');
    for (const id of ['dc1-1', 'dc1-2']) await app.breaker.record(`users/${id}`, { success: false });
    const { ws, res } = await connect(app);
    expect(res.headers['x-degraded']).toBe('panic');
    expect(await echoes(ws)).toBe('ping');
    expect((await app.breaker.get(`users/${res.headers['x-node']}`))?.state).toBe('open'); // used against its breaker: not judged
  });

  it('marks the 101 head X-Circuit-Would-Refuse: true for a forced-closed node its rules have open', async () => {
    const app = await proxyOver(['dc1-1'], 'failure_threshold: 1\nforced_state: closed');
    await app.breaker.record('users/dc1-1', { success: false });
    const { ws, res } = await connect(app);
    expect(res.headers['x-circuit-would-refuse']).toBe('true');
    expect(res.headers['x-degraded']).toBe('false');
    expect(await echoes(ws)).toBe('ping');
  });
});
