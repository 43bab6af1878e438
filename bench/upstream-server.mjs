// The loopback upstream of the proxy benchmark: a plain node:http server (keep-alive, Node's
// defaults) that answers every request with one fixed JSON body; `GET /health` answers
// {"status":"ok"}. circuitlog's /proxy, node-http-proxy, nginx and the "direct" run all
// load this same process.
//
// Env: PORT (default 0), HOST (default 127.0.0.1), UPSTREAM_BYTES (body size, default 300).
// Prints {"event":"listening","port":N,"bytes":B} on stdout when ready.

import http from 'node:http';

const bytes = Number(process.env.UPSTREAM_BYTES || 300);
const shell = {
  id: 42,
  name: 'bench-item',
  dc: 'dc1',
  tags: ['a', 'b', 'c'],
  updated_at: '2024-01-01T00:00:00.000Z',
  pad: '',
};
const base = JSON.stringify(shell).length;
if (!Number.isInteger(bytes) || bytes < base) throw new Error(`UPSTREAM_BYTES: at least ${base}`);
const body = Buffer.from(JSON.stringify({ ...shell, pad: 'x'.repeat(bytes - base) }));
const health = Buffer.from('{"status":"ok"}');

const server = http.createServer((req, res) => {
  const payload = req.url === '/health' ? health : body;
  if (req.method === 'GET' || req.method === 'HEAD') {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': payload.length });
    res.end(req.method === 'HEAD' ? undefined : payload);
    return;
  }
  // Other methods: read the request body first, then answer the same JSON.
  req.resume();
  req.once('end', () => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': payload.length });
    res.end(payload);
  });
});

const host = process.env.HOST || '127.0.0.1';
server.listen(Number(process.env.PORT || 0), host, () => {
  process.stdout.write(
    `${JSON.stringify({ event: 'listening', host, port: server.address().port, bytes: body.length })}\n`,
  );
});

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 2_000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
