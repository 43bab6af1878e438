import { once } from 'node:events';
import fs from 'node:fs';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { FakeNode } from '../proxy/fake-node.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// The request id (src/request-id.ts) on the real server: kept when well-formed, else made;
// in X-Request-Id on every answer (Hono's routes, the raw GET /allowed, the proxy, the
// WebSocket pass-through), in problem documents and log lines, and sent to the proxy's node.

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** Not 1 to 255 of A-Z a-z 0-9 _ - = (Hono's check). */
const MALFORMED = ['has space', 'a,b', 'x'.repeat(256), '<script>', 'a.b', 'a:b', ''];

const node = await new FakeNode('dc1-1').start();
const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
await once(wss, 'listening');
const upgrades: IncomingMessage[] = [];
wss.on('connection', (ws, req) => {
  upgrades.push(req);
  ws.on('message', (data: Buffer) => ws.send(data));
});
const dir = tempDir('circuitlog-request-id-');
fs.writeFileSync(
  path.join(dir, 'config.yaml'),
  `local_dc: dc1
upstreams:
  users:
    nodes:
      - { id: dc1-1, dc: dc1, url: "${node.url}" }
    health_check: { enabled: false }
  chat:
    nodes:
      - { id: dc1-1, dc: dc1, url: "http://127.0.0.1:${(wss.address() as AddressInfo).port}" }
    health_check: { enabled: false }
`,
);
const server: ServerProcess = await startServer({
  CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
  CIRCUITLOG_CONFIG: path.join(dir, 'config.yaml'),
  CIRCUITLOG_LOG_LEVEL: 'debug',
});

afterAll(async () => {
  await server.stop();
  await node.stop();
  await new Promise((resolve) => wss.close(resolve));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** GET (or another method) with an optional X-Request-Id; the answer's id and body. */
async function send(target: string, id?: string, init: RequestInit = {}) {
  const headers: Record<string, string> = { ...(init.headers as Record<string, string>) };
  if (id !== undefined) headers['x-request-id'] = id;
  const res = await fetch(`${server.url}${target}`, { ...init, headers });
  return { status: res.status, id: res.headers.get('x-request-id'), body: await res.text() };
}

describe('the request id on the real server', () => {
  it('keeps a well-formed incoming X-Request-Id (Hono routes, the raw GET /allowed, the proxy)', async () => {
    for (const target of ['/health', '/circuits/kept/allowed', '/circuits', '/proxy/users/items']) {
      const id = `kept-${target.length}_Root=1-abc`;
      const answer = await send(target, id);
      expect(answer.status, target).toBe(200);
      expect(answer.id, target).toBe(id);
    }
  });

  it('makes a fresh UUID for a request without one', async () => {
    const ids = new Set<string | null>();
    for (const target of ['/health', '/circuits/made/allowed', '/circuits/made/allowed', '/proxy/users/items']) {
      const answer = await send(target);
      expect(answer.id, target).toMatch(UUID_V4);
      ids.add(answer.id);
    }
    expect(ids.size).toBe(4);
  });

  it('replaces a malformed X-Request-Id with a made one and never echoes it', async () => {
    for (const target of ['/health', '/circuits/malformed/allowed', '/proxy/users/items']) {
      for (const bad of MALFORMED) {
        const answer = await send(target, bad);
        expect(answer.id, `${target} ${bad}`).toMatch(UUID_V4);
        if (bad !== '') expect(answer.body, `${target} ${bad}`).not.toContain(bad);
      }
    }
  });

  it('puts the id in every problem document, on each way of answering', async () => {
    await send('/circuits/refused/failure', undefined, { method: 'POST' });
    await send('/circuits/refused', undefined, {
      method: 'PATCH',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ forced_state: 'open' }),
    });
    const cases: [string, RequestInit, number][] = [
      ['/circuits/refused/allowed', {}, 503], // the raw GET /allowed
      ['/circuits/refused/allowed?caller=a', {}, 503], // the Hono route
      ['/circuits/no-such-circuit', {}, 404], // notFound/onError
      ['/no/such/path', {}, 404],
      ['/proxy/nope/x', {}, 404], // the raw proxy listener
    ];
    for (const [target, init, status] of cases) {
      for (const id of ['problem-id-1', undefined, 'bad id']) {
        const answer = await send(target, id, init);
        expect(answer.status, target).toBe(status);
        if (id === 'problem-id-1') expect(answer.id).toBe(id);
        else expect(answer.id).toMatch(UUID_V4);
        expect(JSON.parse(answer.body), target).toMatchObject({ request_id: answer.id });
      }
    }
  });

  it('writes the id on the log line of a failing request', async () => {
    const answer = await send('/circuits/logged/outcomes', 'log-line-id', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ success: 'no' }),
    });
    expect(answer.status).toBe(422);
    const made = await send('/proxy/nope/x');
    for (const id of ['log-line-id', made.id]) {
      await vi.waitFor(() =>
        expect(server.logs.filter((l) => l.event === 'request_failed' && l.request_id === id)).toHaveLength(1),
      );
    }
  });

  it('sends the id to the node, and answers with its own id whatever the node sends back', async () => {
    node.respond = () => ({ headers: { 'x-request-id': 'the-node-s-own' }, body: 'ok' });
    try {
      for (const id of ['forwarded-1', undefined, 'not well formed']) {
        const before = node.seen.length;
        const answer = await send('/proxy/users/forwarded', id);
        expect(answer.status).toBe(200);
        const sent = node.seen[before]!.headers['x-request-id'];
        expect(sent).toBe(answer.id);
        if (id === 'forwarded-1') expect(sent).toBe(id);
        else expect(sent).toMatch(UUID_V4);
      }
    } finally {
      node.respond = null;
    }
  });

  it('carries the id through the WebSocket handshake: to the node and on the 101', async () => {
    for (const id of ['ws-handshake-1', undefined]) {
      const before = upgrades.length;
      const ws = new WebSocket(`${server.url.replace('http', 'ws')}/proxy/chat/room`, {
        headers: id === undefined ? {} : { 'x-request-id': id },
      });
      const [upgraded, opened] = [once(ws, 'upgrade'), once(ws, 'open')];
      const [res] = (await upgraded) as [IncomingMessage];
      await opened;
      const answered = res.headers['x-request-id'];
      if (id !== undefined) expect(answered).toBe(id);
      else expect(answered).toMatch(UUID_V4);
      expect(upgrades[before]!.headers['x-request-id']).toBe(answered);
      ws.close();
      await once(ws, 'close');
    }
  });
});
