// node-http-proxy (`http-proxy`) baseline of the proxy benchmark: http.createServer +
// httpProxy.createProxyServer({target}) with a keep-alive http.Agent towards the upstream
// (without an agent, http-proxy sends `Connection: close` and opens a socket per request).
//
// Env: PORT (default 0), HOST (default 127.0.0.1), PROXY_TARGET (e.g. http://127.0.0.1:1234, required),
//      PROXY_MAX_SOCKETS (agent maxSockets, default unlimited), PROXY_MAX_FREE_SOCKETS (default 256).
// Prints {"event":"listening","port":N,"agent":{...}} on stdout when ready.

import http from 'node:http';
import httpProxy from 'http-proxy';

const target = process.env.PROXY_TARGET;
if (!target) throw new Error('PROXY_TARGET is required');
const agentOptions = {
  keepAlive: true,
  keepAliveMsecs: 1_000,
  maxSockets: process.env.PROXY_MAX_SOCKETS ? Number(process.env.PROXY_MAX_SOCKETS) : Infinity,
  maxFreeSockets: Number(process.env.PROXY_MAX_FREE_SOCKETS || 256),
  scheduling: 'lifo',
};
const agent = new http.Agent(agentOptions);
// xfwd: adds X-Forwarded-For/-Port/-Proto like circuitlog's proxy (and the nginx config) do.
const proxy = httpProxy.createProxyServer({ target, agent, xfwd: true });
proxy.on('error', (error, _req, res) => {
  process.stderr.write(`http-proxy-server: ${error.message}\n`);
  if (res && typeof res.writeHead === 'function') {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end('Bad Gateway');
  } else res?.destroy?.();
});

const server = http.createServer((req, res) => proxy.web(req, res));
const host = process.env.HOST || '127.0.0.1';
server.listen(Number(process.env.PORT || 0), host, () => {
  const agentInfo = { ...agentOptions, maxSockets: String(agentOptions.maxSockets) };
  process.stdout.write(
    `${JSON.stringify({ event: 'listening', host, port: server.address().port, target, agent: agentInfo })}\n`,
  );
});

const stop = () => {
  server.close(() => {
    agent.destroy();
    process.exit(0);
  });
  server.closeAllConnections?.();
  setTimeout(() => process.exit(0), 2_000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
