// The edge section's window on what the server receives (bench/edge.mjs, aggregation): a
// pass-through node:http proxy between one edge agent and circuitlog that forwards every request
// as it is (the event stream included, chunk by chunk) and notes the arrival time and item count
// of each `POST /outcomes` batch. `GET /__bench/batches` (answered here, never forwarded) returns
// them as {"batches": [[t_ms, items], ...]} (t: performance.timeOrigin + now, ms) and forgets them.
//
// Env: PORT (default 0), HOST (default 127.0.0.1), TARGET (circuitlog's base URL, required).
// Prints {"event":"listening","port":N} on stdout when ready.

import http from 'node:http';
import { performance } from 'node:perf_hooks';

const target = new URL(process.env.TARGET ?? '');
const host = process.env.HOST || '127.0.0.1';
const port = Number(process.env.PORT || 0);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'upgrade']);
const MAX_NOTED = 1_000_000;
let batches = [];

const strip = (headers) => Object.fromEntries(Object.entries(headers).filter(([k]) => !HOP.has(k)));

const server = http.createServer((req, res) => {
  const t = performance.timeOrigin + performance.now();
  if (req.url === '/__bench/batches') {
    const body = JSON.stringify({ batches });
    batches = [];
    res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    return;
  }
  const up = http.request(
    {
      host: target.hostname,
      port: target.port,
      method: req.method,
      path: req.url,
      headers: strip(req.headers),
      agent,
    },
    (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, strip(upRes.headers));
      upRes.pipe(res);
    },
  );
  up.on('error', () => {
    if (!res.headersSent) res.writeHead(502).end();
    else res.destroy();
  });
  res.on('close', () => {
    if (!res.writableFinished) up.destroy();
  });
  const isBatch = req.method === 'POST' && req.url.split('?')[0] === '/outcomes';
  if (!isBatch) {
    req.pipe(up);
    return;
  }
  const chunks = [];
  req.on('data', (c) => {
    chunks.push(c);
    up.write(c);
  });
  req.on('end', () => {
    up.end();
    let items = 0;
    try {
      items = JSON.parse(Buffer.concat(chunks).toString('utf8')).outcomes?.length ?? 0;
    } catch {
      items = -1;
    }
    if (batches.length < MAX_NOTED) batches.push([t, items]);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, host, () => {
  process.stdout.write(`${JSON.stringify({ event: 'listening', host, port: server.address().port })}\n`);
});
const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 1_000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
