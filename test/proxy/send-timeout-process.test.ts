import { once } from 'node:events';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { parseMetrics } from '../observe/observe-app.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { proxyYaml } from './fake-node.js';

/**
 * nginx's send_timeout on the proxy (issue 27, item 7), in the real process: callers that
 * never read their answer are cut off after `send_timeout_ms`, and their slots and the
 * nodes' connections come back. The nodes send far more than the kernel buffers hold.
 */
const CHUNK = Buffer.alloc(64 * 1024, 0x61); // 64 KiB
const BIG_BYTES = 256 * 1024 * 1024; // 256 MiB: more than any socket buffer on the way
const STALE_BYTES = 32 * 1024 * 1024; // 32 MiB, kept for the stale fallback
const CALLERS = 64;

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** Body sizes by path; any other path gets 1 KiB. */
const SIZES: Record<string, number> = { '/big': BIG_BYTES, '/stale': STALE_BYTES };

/** A loopback node streaming `SIZES[path]` bytes with backpressure; counts answers cut before their end. */
async function startBigNode() {
  const stats = { cut: 0 };
  const server = http.createServer((req, res) => {
    const size = SIZES[req.url ?? ''] ?? 1024;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
    let sent = 0;
    const pump = () => {
      while (sent < size && !res.destroyed) {
        const chunk = CHUNK.subarray(0, Math.min(CHUNK.length, size - sent));
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('close', () => {
      if (sent < size) stats.cut++;
    });
    pump();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const stop = () => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  };
  cleanup.push(() => server.listening && stop());
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stats, stop };
}

async function launch(nodeUrl: string, extra: string): Promise<ServerProcess> {
  const dir = tempDir();
  const configPath = path.join(dir, 'proxy.yaml');
  fs.writeFileSync(configPath, proxyYaml({ 'dc1-1': { id: 'dc1-1', url: nodeUrl } }, extra));
  const server = await startServer({ CIRCUITLOG_CONFIG: configPath, CIRCUITLOG_DB: path.join(dir, 'db.sqlite') });
  cleanup.push(() => server.stop('SIGKILL'));
  return server;
}

async function metric(server: ServerProcess, series: string): Promise<number | undefined> {
  const res = await fetch(`${server.url}/metrics`);
  return parseMetrics(await res.text()).get(series);
}

/** Poll the server's metrics until `series` reads `value` (the test's timeout is the bound). */
async function untilMetric(server: ServerProcess, series: string, value: number): Promise<void> {
  while ((await metric(server, series)) !== value) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** A caller on a raw socket that sends `request` and never reads a byte of the answer. */
function deafCaller(port: number, request: string): void {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.write(request);
  cleanup.push(() => socket.destroy()); // no 'data' listener and never resumed: nothing is read
}

/**
 * Connections of the server's `port` whose kernel still holds bytes to send (Linux
 * /proc/net/tcp, `tx_queue`): a timed-out caller closed without a reset stays there, in
 * FIN-WAIT-1, offered its unread megabytes for minutes.
 */
function unsentOnPort(port: number): number {
  const local = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return fs
    .readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter(([, address, , state, queues]) => address?.endsWith(local) && state !== '0A' && queues !== undefined)
    .filter(([, , , , queues]) => Number.parseInt(queues!.split(':')[0]!, 16) > 0).length;
}

async function untilNoUnsent(port: number): Promise<void> {
  while (unsentOnPort(port) > 0) await new Promise((resolve) => setTimeout(resolve, 20));
}

const TIMEOUTS = 'circuitlog_proxy_send_timeouts_total{upstream="users"}';
const IN_FLIGHT = 'circuitlog_proxy_in_flight{upstream="users"}';

describe('send_timeout_ms in the real process', () => {
  it('cuts off 64 callers that never read a big answer, with a reset: their slots and node connections come back, and a reading caller is served', async () => {
    const node = await startBigNode();
    const server = await launch(
      node.url,
      `max_concurrent: ${CALLERS}\nsend_timeout_ms: 200\nhealth_check: { enabled: false }`,
    );
    for (let i = 0; i < CALLERS; i++)
      deafCaller(server.port, 'GET /proxy/users/big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await untilMetric(server, TIMEOUTS, CALLERS);
    await untilMetric(server, IN_FLIGHT, 0);
    while (node.stats.cut < CALLERS) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(node.stats.cut).toBe(CALLERS); // every node connection was given up, none left streaming
    const res = await fetch(`${server.url}/proxy/users/small`);
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(1024);
    expect(await metric(server, TIMEOUTS)).toBe(CALLERS); // callers that read are never counted
    await untilNoUnsent(server.port); // each was reset (nginx's reset_timedout_connection): no unread megabytes left in the kernel
  }, 120_000); // each deaf caller fills ~9 MB of socket buffers before it stalls: ~600 MB through loopback on a busy machine

  it('cuts off a WebSocket caller that stops reading while the node sends, with a reset, and frees the tunnel slot and the node connection', async () => {
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await once(wss, 'listening');
    let nodeClosed = 0;
    wss.on('connection', (ws) => {
      const frame = Buffer.alloc(64 * 1024, 0x62);
      const pump = () => {
        // ws buffers without bound: send only while its socket keeps up (bufferedAmount under 1 MiB)
        while (ws.readyState === ws.OPEN && ws.bufferedAmount < 1024 * 1024) ws.send(frame);
        if (ws.readyState === ws.OPEN) setTimeout(pump, 5);
      };
      pump();
      ws.on('close', () => nodeClosed++);
    });
    cleanup.push(() => {
      for (const c of wss.clients) c.terminate();
      return new Promise((resolve) => wss.close(resolve));
    });
    const server = await launch(
      `http://127.0.0.1:${(wss.address() as AddressInfo).port}`,
      'max_concurrent: 1\nsend_timeout_ms: 200\nhealth_check: { enabled: false }',
    );
    deafCaller(
      server.port,
      'GET /proxy/users/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await untilMetric(server, TIMEOUTS, 1);
    await untilMetric(server, IN_FLIGHT, 0);
    while (nodeClosed < 1) await new Promise((resolve) => setTimeout(resolve, 20));
    await untilNoUnsent(server.port);
    const reader = new WebSocket(`${server.url.replace('http', 'ws')}/proxy/users/chat`); // the one slot is free again
    await once(reader, 'open');
    reader.close();
    await once(reader, 'close');
  });

  it('cuts off a caller that does not read a large stale fallback answer, with a reset', async () => {
    const node = await startBigNode();
    const server = await launch(
      node.url,
      'send_timeout_ms: 200\nhealth_check: { enabled: false }\n' +
        `fallback: { stale_seconds: 600, stale_max_body_bytes: ${STALE_BYTES}, stale_max_total_bytes: ${2 * STALE_BYTES} }`,
    );
    const fresh = await fetch(`${server.url}/proxy/users/stale`); // read whole: kept for the fallback
    expect((await fresh.arrayBuffer()).byteLength).toBe(STALE_BYTES);
    await node.stop(); // now every attempt is refused: the stale copy is the answer
    // The same Host as fetch sent: the stale copy is kept per Host, path and query.
    deafCaller(server.port, `GET /proxy/users/stale HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\n\r\n`);
    await untilMetric(server, 'circuitlog_proxy_fallbacks_total{upstream="users",kind="stale"}', 1);
    await untilMetric(server, TIMEOUTS, 1);
    await untilNoUnsent(server.port);
  });

  it('cuts off a caller that does not read a large non-101 answer to its upgrade request, and frees the node connection', async () => {
    const node = await startBigNode(); // a plain HTTP server: it answers the upgrade request with 200 and 256 MiB
    const server = await launch(node.url, 'max_concurrent: 1\nsend_timeout_ms: 200\nhealth_check: { enabled: false }');
    deafCaller(
      server.port,
      'GET /proxy/users/big HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n' +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n',
    );
    await untilMetric(server, TIMEOUTS, 1);
    while (node.stats.cut < 1) await new Promise((resolve) => setTimeout(resolve, 20));
    await untilNoUnsent(server.port);
  });

  it('reads on for the followers when a coalescing leader that stopped reading is cut off', async () => {
    const node = await startBigNode();
    const server = await launch(
      node.url,
      'send_timeout_ms: 3000\nhealth_check: { enabled: false }\n' +
        `coalesce: { enabled: true, max_body_bytes: ${STALE_BYTES} }`,
    );
    // Leader and follower send the same Host, Accept and (no) Accept-Encoding: one coalescing key.
    deafCaller(server.port, `GET /proxy/users/stale HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nAccept: */*\r\n\r\n`);
    await untilMetric(
      server,
      'circuitlog_proxy_requests_total{upstream="users",node="dc1-1",dc="dc1",status="200"}',
      1,
    );
    // The follower joins the leader's call, long before the leader's 3 s are up.
    const follower = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http
        .get(`${server.url}/proxy/users/stale`, { agent: false, headers: { accept: '*/*' } }, resolve)
        .on('error', reject),
    );
    expect(follower.headers['x-coalesced']).toBe('true');
    let bytes = 0;
    for await (const chunk of follower) bytes += (chunk as Buffer).length;
    expect(bytes).toBe(STALE_BYTES);
    expect(await metric(server, TIMEOUTS)).toBe(1);
    await untilMetric(server, IN_FLIGHT, 0);
  });
});
