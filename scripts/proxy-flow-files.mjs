// The files a proxied GET that fails over runs through (docs/design.md, "A proxied request
// with failover"): `npm run build && node scripts/proxy-flow-files.mjs [DIST]`.
//
// It starts the built server (DIST/main.js, default dist/) in this process on a temp database,
// with one upstream of two loopback nodes: the first answers 500 (a failure status), the
// second 200. After two warm-up requests it resets V8's precise coverage, sends one
// `GET /proxy/users/list` (the first node fails, the retry reaches the second), waits for the
// outcomes' group commit, and prints every file of DIST in which a function ran, then their
// count. Module loading is not counted: the top-level code ran at start-up.
import fs from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const dist = path.resolve(process.argv[2] ?? 'dist');
process.argv.length = 2; // main.js reads its own arguments

const listen = (handler) =>
  new Promise((resolve) => {
    const server = http.createServer(handler).listen(0, '127.0.0.1', () => resolve(server));
  });
let failures = 0;
const failing = await listen((_req, res) => {
  failures++;
  res.writeHead(500).end('failing');
});
const healthy = await listen((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-flow-'));
const config = path.join(dir, 'proxy.yaml');
fs.writeFileSync(
  config,
  `local_dc: dc1
upstreams:
  users:
    retries: 1
    failure_threshold: 1000 # the failures never trip the first node: the flow, not a transition
    health_check: { enabled: false }
    nodes:
      - { id: dc1-1, dc: dc1, url: "http://127.0.0.1:${failing.address().port}" }
      - { id: dc1-2, dc: dc1, url: "http://127.0.0.1:${healthy.address().port}" }
`,
);
Object.assign(process.env, {
  PORT: '0',
  HOST: '127.0.0.1',
  CIRCUITLOG_CONFIG: config,
  CIRCUITLOG_DB: path.join(dir, 'circuitlog.db'),
  CIRCUITLOG_LOG_LEVEL: 'silent',
});

const session = new inspector.Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });

const servers = [];
const listenOriginal = http.Server.prototype.listen;
http.Server.prototype.listen = function (...args) {
  servers.push(this);
  return listenOriginal.apply(this, args);
};
await import(pathToFileURL(path.join(dist, 'main.js')).href);
let server;
for (let i = 0; i < 400 && server === undefined; i++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
  server = servers.find((s) => s !== failing && s !== healthy && s.listening);
}
if (server === undefined) throw new Error('the server did not listen within 20 s');

const get = () =>
  new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port: server.address().port, path: '/proxy/users/list' }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, node: res.headers['x-node'] }));
      })
      .on('error', reject);
  });
const settle = () => new Promise((resolve) => setTimeout(resolve, 300)); // the outcomes' group commit

await get();
await get();
await settle();
await session.post('Profiler.takePreciseCoverage'); // resets the counts
const failuresBefore = failures;
const answer = await get();
await settle();
const { result } = await session.post('Profiler.takePreciseCoverage');

if (answer.status !== 200 || answer.node !== 'dc1-2' || failures !== failuresBefore + 1)
  throw new Error(`not a failover: ${JSON.stringify(answer)}, ${failures - failuresBefore} failing attempt(s)`);
const prefix = `${pathToFileURL(dist).href}/`;
const files = result
  .filter((script) => script.url.startsWith(prefix))
  .filter((script) => script.functions.some((f) => f.ranges[0].startOffset > 0 && f.ranges[0].count > 0))
  .map((script) => script.url.slice(prefix.length).replace(/\.js$/, '.ts'))
  .sort();
for (const file of files) console.log(`src/${file}`);
console.log(`${files.length} files`);
process.exit(0);
