// The files of src/ one request runs through, for the flows of docs/design.md ("Three flows, file
// by file"): `npm run build && node scripts/flow-files.mjs outcome|proxy [DIST]`.
//
// It starts the built server (DIST/main.js, default dist/) in this process on a temp SQLite
// database with metrics on (the defaults), warms the flow up, resets V8's precise coverage,
// sends the one request, waits for the group commit, and prints every file of DIST in which a
// function ran, then their count. Module loading is not counted (the top-level code ran at
// start-up), nor is the due-transitions timer: it is never started here (its 0.5 s rounds are
// not the request's flow).
//
// outcome: a warm-up circuit with failure_threshold 2 is tripped; then the measured circuit is
//   made the same way and given one failure; the measured request is the failure that trips it.
// proxy: one upstream of two loopback nodes, the first answering 500 (a failure status), the
//   second 200; after two warm-up requests, the measured `GET /proxy/users/list` fails on the
//   first node and is retried on the second.
import fs from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [flow, distArg] = process.argv.slice(2);
if (flow !== 'outcome' && flow !== 'proxy') {
  console.error('usage: node scripts/flow-files.mjs outcome|proxy [DIST]');
  process.exit(2);
}
const dist = path.resolve(distArg ?? 'dist');
process.argv.length = 2; // main.js reads its own arguments
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-flow-'));
const settle = () => new Promise((resolve) => setTimeout(resolve, 300)); // the group commit

/** A loopback server of this process (an upstream node). */
const listen = (handler) =>
  new Promise((resolve) => {
    const server = http.createServer(handler).listen(0, '127.0.0.1', () => resolve(server));
  });

/** Start circuitlog in this process under V8's precise coverage; its listening server. */
async function startCircuitlog(env, upstreams = []) {
  Object.assign(process.env, {
    PORT: '0',
    HOST: '127.0.0.1',
    CIRCUITLOG_DB: path.join(dir, 'circuitlog.db'),
    CIRCUITLOG_LOG_LEVEL: 'silent',
    ...env,
  });
  const servers = [];
  const listenOriginal = http.Server.prototype.listen;
  http.Server.prototype.listen = function (...args) {
    servers.push(this);
    return listenOriginal.apply(this, args);
  };
  const { DueTransitions } = await import(pathToFileURL(path.join(dist, 'service/due-transitions.js')).href);
  DueTransitions.prototype.start = () => {};
  await import(pathToFileURL(path.join(dist, 'main.js')).href);
  for (let i = 0; i < 400; i++) {
    const server = servers.find((s) => !upstreams.includes(s) && s.listening);
    if (server !== undefined) return server;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('the server did not listen within 20 s');
}

/** One request to the server: its status, JSON body (null when empty) and `X-Node`. */
const send = (server, method, url, body, contentType = 'application/json') =>
  new Promise((resolve, reject) => {
    const text = body === undefined ? '' : JSON.stringify(body);
    const headers =
      body === undefined ? {} : { 'content-type': contentType, 'content-length': Buffer.byteLength(text) };
    const req = http.request({ host: '127.0.0.1', port: server.address().port, method, path: url, headers }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        data += chunk;
      });
      res.on('end', () => {
        let json = null;
        try {
          json = data === '' ? null : JSON.parse(data);
        } catch {} // a proxied body need not be JSON
        resolve({ status: res.statusCode, body: json, node: res.headers['x-node'] });
      });
    });
    req.on('error', reject);
    req.end(text);
  });

/** The flows: each warms up, then returns the measured request and its check. */
const flows = {
  async outcome(session) {
    const server = await startCircuitlog({});
    const failure = (name) => send(server, 'POST', `/circuits/${name}/outcomes`, { success: false });
    const create = async (name) => {
      const created = await send(
        server,
        'PATCH',
        `/circuits/${name}`,
        { failure_threshold: 2 },
        'application/merge-patch+json',
      );
      if (created.status !== 201) throw new Error(`PATCH /circuits/${name}: ${created.status}`);
    };
    await create('warm-up');
    await failure('warm-up');
    await failure('warm-up');
    await create('flow');
    const first = await failure('flow');
    await settle();
    await session.post('Profiler.takePreciseCoverage'); // resets the counts
    const answer = await failure('flow');
    if (first.body?.state !== 'closed' || answer.status !== 200 || answer.body?.state !== 'open')
      throw new Error(`not a trip: ${JSON.stringify({ first, answer })}`);
  },
  async proxy(session) {
    let failures = 0;
    const failing = await listen((_req, res) => {
      failures++;
      res.writeHead(500).end('failing');
    });
    const healthy = await listen((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
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
    const server = await startCircuitlog({ CIRCUITLOG_CONFIG: config }, [failing, healthy]);
    const get = () => send(server, 'GET', '/proxy/users/list');
    await get();
    await get();
    await settle();
    await session.post('Profiler.takePreciseCoverage'); // resets the counts
    const before = failures;
    const answer = await get();
    if (answer.status !== 200 || answer.node !== 'dc1-2' || failures !== before + 1)
      throw new Error(`not a failover: ${JSON.stringify(answer)}, ${failures - before} failing attempt(s)`);
  },
};

const session = new inspector.Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: true });
await flows[flow](session);
await settle();
const { result } = await session.post('Profiler.takePreciseCoverage');

const prefix = `${pathToFileURL(dist).href}/`;
const files = result
  .filter((script) => script.url.startsWith(prefix))
  .filter((script) => script.functions.some((f) => f.ranges[0].startOffset > 0 && f.ranges[0].count > 0))
  .map((script) => script.url.slice(prefix.length).replace(/\.js$/, '.ts'))
  .sort();
for (const file of files) console.log(`src/${file}`);
console.log(`${files.length} files`);
process.exit(0);
