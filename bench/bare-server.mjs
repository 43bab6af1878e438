// A minimal Hono app on @hono/node-server: the "bare" baseline for the benchmarks.
//
// Env:
//   PORT (default 0), HOST (default 127.0.0.1)
//   BARE_ROUTES  JSON array of { method: "GET"|"POST", path, bytes, parseJson? }
//                Each route answers 200 with a precomputed JSON body of exactly `bytes`
//                bytes (Content-Type: application/json, like Hono's c.json()). With
//                parseJson the request body is parsed first (await c.req.json()).
//                Default: GET /bare and POST /bare (parseJson), 300 bytes each.
// Prints {"event":"listening","port":N} on stdout when ready.

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
const server = serve({ fetch: app.fetch, port: Number(process.env.PORT || 0), hostname: host }, (info) => {
  process.stdout.write(
    `${JSON.stringify({ event: 'listening', host, port: info.port, routes: routes.map((r) => `${r.method} ${r.path} ${r.bytes}B`) })}\n`,
  );
});

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 2_000);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
