import { once } from 'node:events';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { proxyYaml, startNodes } from './fake-node.js';
import { rawRequest } from './proxy-app.js';

let server: ServerProcess | null = null;
let wss: WebSocketServer | null = null;

afterEach(async () => {
  await server?.stop('SIGKILL');
  for (const c of wss?.clients ?? []) c.terminate();
  await new Promise((resolve) => (wss ? wss.close(resolve) : resolve(undefined)));
  server = wss = null;
});

describe('WebSocket pass-through in the real process', () => {
  it('echoes through dist/main.js (the upgrade listener is wired)', async () => {
    wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(wss, 'listening');
    wss.on('connection', (ws) => ws.on('message', (data: Buffer) => ws.send(data)));
    const dir = tempDir();
    const configPath = path.join(dir, 'proxy.yaml');
    const node = { id: 'dc1-1', url: `http://127.0.0.1:${(wss.address() as AddressInfo).port}` };
    fs.writeFileSync(configPath, proxyYaml({ 'dc1-1': node }, 'health_check: { enabled: false }'));
    server = await startServer({ CIRCUITLOG_CONFIG: configPath, CIRCUITLOG_DB: path.join(dir, 'db.sqlite') });
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/proxy/users/chat`);
    await once(ws, 'open');
    ws.send('ping');
    const [data] = await once(ws, 'message');
    expect(String(data)).toBe('ping');
    ws.close();
    await once(ws, 'close');
  });

  it('serves Upgrade: h2c as HTTP/1.1 through dist/main.js, on /proxy and on /health', async () => {
    const { 'dc1-1': node } = await startNodes('dc1-1');
    try {
      const dir = tempDir();
      const configPath = path.join(dir, 'proxy.yaml');
      fs.writeFileSync(configPath, proxyYaml({ 'dc1-1': node! }, 'health_check: { enabled: false }'));
      server = await startServer({ CIRCUITLOG_CONFIG: configPath, CIRCUITLOG_DB: path.join(dir, 'db.sqlite') });
      const h2c = {
        connection: 'Upgrade, HTTP2-Settings',
        upgrade: 'h2c',
        'http2-settings': 'AAMAAABkAARAAAAAAAIAAAAA',
      };
      const proxied = await rawRequest(server.url, 'GET', '/proxy/users/x', h2c);
      expect([proxied.status, proxied.headers['x-node']]).toEqual([200, 'dc1-1']);
      expect((await rawRequest(server.url, 'GET', '/health', h2c)).status).toBe(200);
    } finally {
      await node!.stop();
    }
  });
});
