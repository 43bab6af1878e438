import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { startProxyApp } from './proxy-app.js';
import { until } from './proxy-app.js';

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const clean of cleanups.splice(0).reverse()) await clean();
});

/** A WebSocket node that holds each handshake until `release` is called. */
async function gatedWsNode() {
  let seen = 0;
  let release = () => {};
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    verifyClient: (_info, done) => {
      seen++;
      new Promise<void>((resolve) => (release = resolve)).then(() => done(true));
    },
  });
  await once(wss, 'listening');
  cleanups.push(() => {
    for (const c of wss.clients) c.terminate();
    return new Promise((resolve) => wss.close(resolve));
  });
  return {
    url: `http://127.0.0.1:${(wss.address() as AddressInfo).port}`,
    get seen() {
      return seen;
    },
    release: () => release(),
  };
}

describe('WebSocket handshake outcomes', () => {
  it('a slow WebSocket handshake counts in the node slow-call window (duration: dispatch to 101)', async () => {
    const node = await gatedWsNode();
    const app = await startProxyApp(
      { 'dc1-1': { id: 'dc1-1', url: node.url } },
      'health_check: { enabled: false }\nwindow: { type: count, size: 2, slow_call_duration_ms: 100 }',
    );
    cleanups.push(() => app.close());
    for (let i = 0; i < 2; i++) {
      const ws = new WebSocket(`${app.url.replace('http', 'ws')}/proxy/users/chat`);
      cleanups.push(() => ws.terminate());
      const opened = once(ws, 'open');
      await until(() => node.seen > i);
      app.clock.advance(500);
      node.release();
      await opened;
    }
    const circuit = (await (await app.request('GET', '/circuits/users%2Fdc1-1')).json()) as Record<string, unknown>;
    expect(circuit.state).toBe('open');
    const { events } = (await (await app.request('GET', '/circuits/users%2Fdc1-1/events')).json()) as {
      events: { to: string; reason: string }[];
    };
    expect(events[0]).toMatchObject({ to: 'open', reason: 'slow_call_rate_exceeded' });
  });
});
