// A minimal Hono app on @hono/node-server: the "bare" baseline for the benchmarks.
//
// Env:
//   PORT (default 0), HOST (default 127.0.0.1)
//   BARE_ROUTES  JSON array of { method: "GET"|"POST", path, bytes, parseJson? }
//                Each route answers 200 with a precomputed JSON body of exactly `bytes`
//                bytes (Content-Type: application/json, like Hono's c.json()). With
//                parseJson the request body is parsed first (await c.req.json()).
//                Default: GET /bare and POST /bare (parseJson), 300 bytes each.
//   BARE_RAW=1   no Hono: node:http alone answers the GET routes (writeHead with a flat header
//                list, then end), the floor any route served by node:http can reach.
// Prints {"event":"listening","port":N} on stdout when ready.

import http from 'node:http';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { jsonBodyOfSize } from './lib.mjs';

const routes = process.env.BARE_ROUTES
  ? JSON.parse(process.env.BARE_ROUTES)
  : [
      { method: 'GET', path: '/bare', bytes: 300 },
      { method: 'POST', path: '/bare', bytes: 300, parseJson: true },
    ];

const app = new Hono();
// A fresh headers object per response: @hono/node-server writes into the object it is given.
const headers = () => ({ 'content-type': 'application/json' });
for (const route of routes) {
  const body = jsonBodyOfSize(route.bytes);
  const method = route.method.toLowerCase();
  if (method !== 'get' && method !== 'post') throw new Error(`bare-server: unsupported method ${route.method}`);
  if (route.parseJson) {
    app[method](route.path, async (c) => {
      await c.req.json();
      return c.body(body, 200, headers());
    });
  } else {
    app[method](route.path, (c) => c.body(body, 200, headers()));
  }
}
app.get('/health', (c) => c.json({ status: 'ok' }));
app.onError((error, c) => {
  process.stderr.write(`bare-server: ${c.req.method} ${c.req.path}: ${error.stack ?? error}\n`);
  return c.text('Internal Server Error', 500);
});

const host = process.env.HOST || '127.0.0.1';
const listening = (info) =>
  process.stdout.write(
    `${JSON.stringify({ event: 'listening', host, port: info.port, routes: routes.map((r) => `${r.method} ${r.path} ${r.bytes}B`) })}\n`,
  );
const server =
  process.env.BARE_RAW === '1'
    ? rawServer()
    : serve({ fetch: app.fetch, port: Number(process.env.PORT || 0), hostname: host }, listening);

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 2_000);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

/** node:http alone: each GET route's body written with a flat header list, as circuitlog's raw listeners do. */
function rawServer() {
  const bodies = new Map(routes.filter((r) => r.method === 'GET').map((r) => [r.path, jsonBodyOfSize(r.bytes)]));
  bodies.set('/health', '{"status":"ok"}');
  const raw = http.createServer((req, res) => {
    const body = req.method === 'GET' ? bodies.get(req.url) : undefined;
    if (body === undefined) return res.writeHead(404).end();
    res
      .writeHead(200, ['content-type', 'application/json', 'Content-Length', String(Buffer.byteLength(body))])
      .end(body);
  });
  raw.listen(Number(process.env.PORT || 0), host, () => listening(raw.address()));
  return raw;
}
