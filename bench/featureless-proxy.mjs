// The featureless Node proxy of the proxy benchmark (issue 12's baseline): `node:http` hands
// each request to undici's `Pool.stream` (the version circuitlog ships) with the response as
// the stream's writable; only `content-type` is copied. No routing, header hygiene, breaker,
// bulkhead or timeouts: the ceiling a Node proxy built on these two pieces can reach.
//
// Env: PORT (default 0), HOST (default 127.0.0.1), PROXY_TARGET (required),
//      PROXY_WORKERS (node:cluster processes sharing the port, default 1).
// Prints {"event":"listening","port":N} on stdout when every worker listens.

import cluster from 'node:cluster';
import http from 'node:http';
import { Pool } from 'undici';

const target = process.env.PROXY_TARGET;
if (!target) throw new Error('PROXY_TARGET is required');
const workers = Number(process.env.PROXY_WORKERS || 1);
const host = process.env.HOST || '127.0.0.1';
const port = Number(process.env.PORT || 0);

if (workers > 1 && cluster.isPrimary) {
  let listening = 0;
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on('listening', (_worker, address) => {
    if (++listening === workers)
      process.stdout.write(`${JSON.stringify({ event: 'listening', host, port: address.port, workers })}\n`);
  });
  const stop = () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
    setTimeout(() => process.exit(0), 2_000).unref();
    cluster.on('exit', () => Object.keys(cluster.workers ?? {}).length === 0 && process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} else {
  const pool = new Pool(target);
  const server = http.createServer((req, res) => {
    pool.stream(
      { path: req.url, method: req.method, body: req.method === 'GET' || req.method === 'HEAD' ? null : req },
      ({ statusCode, headers }) => {
        res.statusCode = statusCode;
        if (headers['content-type'] !== undefined) res.setHeader('content-type', headers['content-type']);
        return res;
      },
      (error) => {
        if (error && !res.headersSent) res.writeHead(502).end();
        else if (error) res.destroy();
      },
    );
  });
  server.listen(port, host, () => {
    if (workers === 1)
      process.stdout.write(`${JSON.stringify({ event: 'listening', host, port: server.address().port })}\n`);
  });
  const stop = () => {
    server.close(() => pool.close().finally(() => process.exit(0)));
    server.closeAllConnections?.();
    setTimeout(() => process.exit(0), 2_000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
