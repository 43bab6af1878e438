// A loopback upstream with a real capacity (issue 21): it serves at most `capacity` requests at
// once, each in `latencyMs`, and queues the rest first come first served, so latency grows with
// load as a saturated service's does. `GET /health` is answered at once, outside the capacity.
// `GET /__stats` answers its counters (served, most in service, most queued, refused).
//
// As a module: startCapacityUpstream({ capacity, latencyMs }). As a script (bench/overload.mjs
// runs it in its own process): env CAPACITY (32), LATENCY_MS (20), MAX_QUEUE (20000), PORT (0),
// STATUS (200; e.g. 500 for a failing node); prints {"event":"listening","port":N} when ready.

import http from 'node:http';
import { fileURLToPath } from 'node:url';

const BODY = Buffer.from('{"ok":true}');
const LOOPBACK = '127.0.0.1';

/**
 * @param {{ capacity: number, latencyMs: number, maxQueue?: number, status?: number, port?: number }} o
 */
export async function startCapacityUpstream(o) {
  const capacity = o.capacity;
  const maxQueue = o.maxQueue ?? 20_000; // requests waiting; past it, 503 at once (a bound on memory)
  let latencyMs = o.latencyMs;
  let status = o.status ?? 200;
  let inService = 0;
  /** @type {http.ServerResponse[]} */
  const queue = [];
  let head = 0; // queue[head..] wait; a moving index keeps shift() off the hot path
  const stats = { served: 0, maxInService: 0, maxQueued: 0, refused: 0, received: 0 };

  const answer = (res) => {
    if (!res.destroyed) {
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': BODY.length });
      res.end(BODY);
    }
    stats.served++;
    inService--;
    next();
  };
  const serve = (res) => {
    inService++;
    if (inService > stats.maxInService) stats.maxInService = inService;
    setTimeout(answer, latencyMs, res);
  };
  const next = () => {
    while (inService < capacity && head < queue.length) {
      const res = queue[head];
      queue[head++] = undefined;
      if (head > 1024 && head * 2 > queue.length) {
        queue.splice(0, head);
        head = 0;
      }
      if (!res.destroyed) serve(res);
    }
  };

  const server = http.createServer((req, res) => {
    if (req.url === '/health')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    if (req.url === '/__stats')
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ ...stats, inService, queued: queue.length - head }));
    req.resume();
    stats.received++;
    if (inService < capacity && head === queue.length) return serve(res);
    if (queue.length - head >= maxQueue) {
      stats.refused++;
      return void res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"queue full"}');
    }
    queue.push(res);
    if (queue.length - head > stats.maxQueued) stats.maxQueued = queue.length - head;
  });
  server.keepAliveTimeout = 10_000;
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, LOOPBACK, resolve);
  });
  const port = server.address().port;
  return {
    url: `http://${LOOPBACK}:${port}`,
    port,
    stats: () => ({ ...stats, inService, queued: queue.length - head }),
    /** Change the service time of requests that start from now on. */
    setLatency(ms) {
      latencyMs = ms;
    },
    setStatus(code) {
      status = code;
    },
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const int = (name, fallback) => {
    const v = Number(process.env[name] ?? fallback);
    if (!Number.isInteger(v) || v < 0) throw new Error(`${name}: a whole number`);
    return v;
  };
  const up = await startCapacityUpstream({
    capacity: int('CAPACITY', 32),
    latencyMs: int('LATENCY_MS', 20),
    maxQueue: int('MAX_QUEUE', 20_000),
    status: int('STATUS', 200),
    port: int('PORT', 0),
  });
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: up.port })}\n`);
  const stop = () => up.close().then(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
