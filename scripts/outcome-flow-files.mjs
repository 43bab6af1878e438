// The files an outcome that trips its circuit runs through (docs/design.md, "An outcome:
// POST /circuits/{name}/outcomes"): `npm run build && node scripts/outcome-flow-files.mjs [DIST]`.
//
// It starts the built server (DIST/main.js, default dist/) in this process on a temp database,
// SQLite with metrics on (the defaults). A warm-up circuit is created with failure_threshold 2
// and tripped; then the measured circuit is created the same way and given one failure. After
// that it resets V8's precise coverage, sends the one `POST /circuits/flow/outcomes` that trips
// the circuit, waits for the group commit, and prints every file of DIST in which a function
// ran, then their count. Module loading is not counted (the top-level code ran at start-up),
// nor is the due-transitions timer: it is never started here (nothing falls due meanwhile).
import fs from 'node:fs';
import http from 'node:http';
import inspector from 'node:inspector/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const dist = path.resolve(process.argv[2] ?? 'dist');
process.argv.length = 2; // main.js reads its own arguments

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-flow-'));
Object.assign(process.env, {
  PORT: '0',
  HOST: '127.0.0.1',
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
const { DueTransitions } = await import(pathToFileURL(path.join(dist, 'service/due-transitions.js')).href);
DueTransitions.prototype.start = () => {}; // the timer's 0.5 s rounds are not the outcome's flow
await import(pathToFileURL(path.join(dist, 'main.js')).href);
let server;
for (let i = 0; i < 400 && server === undefined; i++) {
  await new Promise((resolve) => setTimeout(resolve, 50));
  server = servers.find((s) => s.listening);
}
if (server === undefined) throw new Error('the server did not listen within 20 s');

const send = (method, url, body, contentType = 'application/json') =>
  new Promise((resolve, reject) => {
    const text = JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port: server.address().port,
        method,
        path: url,
        headers: { 'content-type': contentType, 'content-length': Buffer.byteLength(text) },
      },
      (res) => {
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          data += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode, body: data === '' ? null : JSON.parse(data) }));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
const settle = () => new Promise((resolve) => setTimeout(resolve, 300)); // the group commit
const failure = (name) => send('POST', `/circuits/${name}/outcomes`, { success: false });
const create = async (name) => {
  const created = await send('PATCH', `/circuits/${name}`, { failure_threshold: 2 }, 'application/merge-patch+json');
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
await settle();
const { result } = await session.post('Profiler.takePreciseCoverage');

if (first.body?.state !== 'closed' || answer.status !== 200 || answer.body?.state !== 'open')
  throw new Error(`not a trip: ${JSON.stringify({ first, answer })}`);
const prefix = `${pathToFileURL(dist).href}/`;
const files = result
  .filter((script) => script.url.startsWith(prefix))
  .filter((script) => script.functions.some((f) => f.ranges[0].startOffset > 0 && f.ranges[0].count > 0))
  .map((script) => script.url.slice(prefix.length).replace(/\.js$/, '.ts'))
  .sort();
for (const file of files) console.log(`src/${file}`);
console.log(`${files.length} files`);
process.exit(0);
