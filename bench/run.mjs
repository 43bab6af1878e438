// `npm run bench`: the sections below, selectable with BENCH_ONLY (default: all of them).
//
//   api         circuitlog's hot routes vs a bare Hono route with a same-size JSON body (goals)
//   proxy       GET through circuitlog /proxy vs the same upstream direct, the featureless Node proxy,
//               node-http-proxy and nginx (one worker, when installed)
//               (goals: ≥0.85x featureless, ≥1.20x http-proxy, ≥0.50x nginx)
//   workers     CIRCUITLOG_WORKERS=1 vs 2: GET /allowed, POST failure outcome, proxy GET (informative)
//   durability  POST failure outcomes (all writes) with CIRCUITLOG_SYNCHRONOUS=NORMAL vs FULL (informative)
//   policy      outcome writes vs GET /allowed, 100-item batches, group commit on/off (bench/policy.mjs; goals)
//   quorum      GET /allowed?caller= and failure outcomes with a caller on a quorum circuit vs without (bench/quorum.mjs; goals ≥ 0.9x)
//   redis       Redis store vs SQLite (GET /allowed goal ≥ 0.9x), failure outcomes, 2 hosts vs 1 (bench/redis.mjs)
//   redis-modes plain Redis vs Sentinel and Cluster (GET /allowed ≥ 0.9x, failure outcomes on Cluster ≥ 0.8x),
//               replicas_ack 1 vs 0, outcomes/s with 3 primaries vs 1 (bench/redis-modes.mjs)
//   redis-tls   rediss:// (mutual TLS) vs redis://: GET /allowed (goal ≥ 0.9x), failure outcomes (bench/redis-tls.mjs)
//   metrics     GET /allowed with metrics on vs metrics.enabled false (goal ≥0.95x); /metrics render time (bench/observe.mjs)
//   throttle    GET /allowed on a healthy circuit with a soft throttle vs none (goal ≥0.9x); success outcomes (bench/throttle.mjs)
//   kinds       GET /allowed on a ramping circuit vs a plain closed one (goal ≥0.9x); outcomes with a kind vs without (goal ≥0.9x) (bench/kinds.mjs)
//   history     outcome intake with the outcome history on vs history.enabled false (goal ≥0.8x); bytes per outcome on a real file (bench/history.mjs)
//   stalls      outcomes past metrics.max_circuits, Last-Event-ID replays, dashboard paging vs baselines (bench/stalls.mjs)
//   client      circuitlog/client: call() vs GET /allowed, added µs per call, 4-client exact counts, stream lag (bench/client.mjs)
//   python      the Python client: Client.call() vs GET /allowed from Python, added µs per call, 4 processes' exact counts (bench/python.mjs)
//   overload    the proxy before an upstream with a real capacity, open loop up to 3x: adaptive concurrency
//               limit vs none (goodput, p99, the limit's settling); retry budget with every node failing (bench/overload.mjs)
//   fanout      5,000 /events/stream readers in 4 child processes and 100 circuitlog/client instances on
//               one server: p99 from a transition's acknowledgement to every reader, memory per stream (bench/fanout.mjs)
//   backtest    the policy lab over 1,000,000 recorded outcomes: one policy (goal ≤ 2 s), a 27-point grid over the worker threads (≤ 30 s),
//               event-loop delay while a backtest and the grid run in worker threads (< 50 ms), RSS (bench/backtest.mjs)
//   edge        the edge agent (dist/edge.js): GET /allowed through it vs the server (goal ≥ 1.0x), the server's CPU
//               meanwhile (< 5%), added latency, trip propagation to the agents (p99 ≤ 250 ms), 20 processes' outcomes
//               through one agent vs direct (≤ 1 batch per 10 ms, server CPU per outcome) (bench/edge.mjs)
//   scale       N = 1 .. 1,000,000 circuits: req/s ratios, deep list p50, RSS per circuit, start-up, /metrics;
//               retention's effect on GET /allowed p99 over 10M old transitions (bench/scale.mjs)
//
// Env: BENCH_DURATION (s; default 8 for api/proxy, 5 for workers/durability),
//      BENCH_DURATION_<SECTION> (per section, e.g. BENCH_DURATION_PROXY=10), BENCH_CONNECTIONS (32),
//      BENCH_WARMUP (s, 2), BENCH_PROXY_SETTLE (s, 1: proxy section, an unmeasured run before each
//      measured one on the same target), BENCH_ROUNDS (1), BENCH_TOOL (wrk|autocannon; default wrk when installed),
//      BENCH_WRK_THREADS (1), BENCH_ONLY (comma list of sections api,proxy,workers,durability and/or
//      api scenario ids get,ok,fail), BENCH_CPU_PROF=1 (every circuitlog runs with --cpu-prof; profiles
//      in bench/results/prof/), BENCH_SYNCHRONOUS (NORMAL|FULL, api section), BENCH_CIRCUITLOG_CONFIG
//      (api section), BENCH_UPSTREAM_BYTES (proxy body size, 300), BENCH_NGINX (0 = skip nginx, or its path),
//      BENCH_BASELINE_DIST (another build's dist/ directory: the api section's GET /allowed and the proxy
//      section also run against that build, and its rows are compared with this build's in the same run;
//      the redis-modes section's scaling part runs that build's hosts after this build's, on the same clusters).
//      redis-modes' scaling part: BENCH_SCALING_RUNS (uncapped,capped), BENCH_SCALING_CAP (0.05 of a core per
//      primary), BENCH_SCALING_CAP_PERIOD_US (10000), BENCH_SCALING_CONNECTIONS (8 per host), BENCH_SCALING_PROF (dir).
// See bench/README.md.

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  LOOPBACK,
  envInt,
  environmentInfo,
  fmt,
  fsType,
  makeTempDir,
  markdownComparisons,
  markdownDetails,
  markdownTable,
  pickTool,
  probeOk,
  runSuite,
  startProcess,
  stopAll,
  writeJson,
} from './lib.mjs';
import { findNginx, nginxVersion, startNginx } from './nginx.mjs';
import { policySection } from './policy.mjs';
import { metricsSection } from './observe.mjs';
import { stallsSection } from './stalls.mjs';
import { redisSection } from './redis.mjs';
import { redisModesSection } from './redis-modes.mjs';
import { redisTlsSection } from './redis-tls.mjs';
import { clientSection } from './client.mjs';
import { quorumSection } from './quorum.mjs';
import { pythonSection } from './python.mjs';
import { scaleSection } from './scale.mjs';
import { fanoutSection } from './fanout.mjs';
import { overloadSection } from './overload.mjs';
import { throttleSection } from './throttle.mjs';
import { backtestSection } from './backtest.mjs';
import { kindsSection } from './kinds.mjs';
import { historySection } from './history.mjs';
import { edgeSection } from './edge.mjs';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(benchDir, '..');
const resultsDir = path.join(benchDir, 'results');
const profDir = path.join(resultsDir, 'prof');
const dist = path.join(repoRoot, 'dist', 'main.js');
/** BENCH_BASELINE_DIST: a built baseline (another checkout's dist/), measured beside this build in the same run. */
const baselineDist = process.env.BENCH_BASELINE_DIST ? path.resolve(process.env.BENCH_BASELINE_DIST, 'main.js') : null;
if (baselineDist !== null && !fs.existsSync(baselineDist)) throw new Error(`BENCH_BASELINE_DIST: no ${baselineDist}`);

const SECTIONS = [
  'api',
  'proxy',
  'workers',
  'durability',
  'policy',
  'quorum',
  'metrics',
  'throttle',
  'kinds',
  'history',
  'client',
  'python',
  'edge',
  'redis',
  'redis-modes',
  'redis-tls',
  'backtest',
  'scale',
  'fanout',
  'stalls',
  'overload',
];
const API_IDS = ['get', 'ok', 'fail'];
const DEFAULT_DURATION = {
  api: 8,
  proxy: 8,
  workers: 5,
  durability: 5,
  policy: 5,
  quorum: 5,
  metrics: 8,
  throttle: 5,
  kinds: 5,
  history: 5,
  client: 5,
  python: 6,
  edge: 5,
  redis: 5,
  'redis-modes': 5,
  'redis-tls': 5,
  scale: 3,
  fanout: 0,
  stalls: 0,
  overload: 0,
};

const connections = envInt('BENCH_CONNECTIONS', 32, 1, 10_000);
const warmupSec = envInt('BENCH_WARMUP', 2, 0, 600);
const rounds = envInt('BENCH_ROUNDS', 1, 1, 50);
const upstreamBytes = envInt('BENCH_UPSTREAM_BYTES', 300, 120, 1_000_000);
const cpuProf = process.env.BENCH_CPU_PROF === '1';
const proxyWorkers = envInt('BENCH_PROXY_WORKERS', 1, 1, 8); // proxy section: circuitlog and the featureless proxy
// proxy section: an unmeasured run of this many seconds before each measured one, on the same target (runSuite's settleSec)
const proxySettleSec = envInt('BENCH_PROXY_SETTLE', 1, 0, 60);
const tool = pickTool();
const log = (m) => process.stderr.write(`${m}\n`);

function durationFor(section) {
  const own = `BENCH_DURATION_${section.toUpperCase()}`;
  if (process.env[own]) return envInt(own, DEFAULT_DURATION[section], 1, 600);
  return envInt('BENCH_DURATION', DEFAULT_DURATION[section], 1, 600);
}

/** BENCH_ONLY → {sections, apiIds}: `get,ok,fail` (the old ids) select api scenarios. */
function parseOnly(raw) {
  if (!raw) return { sections: new Set(SECTIONS), apiIds: new Set(API_IDS) };
  const tokens = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = tokens.filter((t) => !SECTIONS.includes(t) && !API_IDS.includes(t));
  if (bad.length)
    throw new Error(`BENCH_ONLY: unknown '${bad.join("', '")}'; use ${[...SECTIONS, ...API_IDS].join(', ')}`);
  const sections = new Set(tokens.filter((t) => SECTIONS.includes(t)));
  const ids = tokens.filter((t) => API_IDS.includes(t));
  if (ids.length) sections.add('api');
  return { sections, apiIds: new Set(ids.length ? ids : API_IDS) };
}
const only = parseOnly(process.env.BENCH_ONLY);

const JSON_HEADERS = { 'content-type': 'application/json' };
const OK_BODY = '{"success":true}';
const FAIL_BODY = '{"success":false}';
const PROXY_PATH = '/items/42';
const NODE_CIRCUIT = 'bench/n1'; // <upstream>/<node id> of the proxy config below

// Temp dirs go even on SIGINT (lib.mjs's handler exits the process after stopping children).
const tempDirs = new Set();
function tempDir(prefix) {
  const dir = makeTempDir(prefix);
  tempDirs.add(dir);
  return dir;
}
function removeTemp(dir) {
  fs.rmSync(dir, { recursive: true, force: true });
  tempDirs.delete(dir);
}
process.on('exit', () => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

async function stopEach(procs) {
  await Promise.all(procs.filter(Boolean).map((p) => p.stop()));
}

// ---------------------------------------------------------------------------
// Processes

/**
 * circuitlog from dist/main.js. At log level `info` it announces itself (once all workers
 * listen, with CIRCUITLOG_WORKERS > 1); at `warn` we poll /health instead.
 */
function startCircuitlog({
  name,
  db,
  workers = 1,
  synchronous = '',
  config = '',
  logLevel = 'info',
  main = dist,
  env = {},
}) {
  const quiet = logLevel !== 'info' && logLevel !== 'debug' && logLevel !== 'trace';
  return startProcess({
    name,
    args: [...(cpuProf ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []), main],
    cwd: path.resolve(path.dirname(main), '..'),
    port: 'auto',
    readyPath: quiet ? '/health' : undefined,
    timeoutMs: 30_000,
    env: {
      HOST: LOOPBACK,
      CIRCUITLOG_DB: db,
      CIRCUITLOG_LOG_LEVEL: logLevel,
      CIRCUITLOG_CONFIG: config,
      CIRCUITLOG_TOKEN: '',
      CIRCUITLOG_SYNCHRONOUS: synchronous,
      CIRCUITLOG_WORKERS: String(workers),
      ...env,
    },
  });
}

const BENCH_TOKEN = 'bench-token-0123456789abcdef';
const CREDENTIALS = 100; // entries in the bench's credentials file
const credentialToken = (i) => `bench-credential-${i}-0123456789abcdef`;

/**
 * Issue 30's JWT identities: a config with `auth.jwt` on a generated JWKS file (RS256), and one
 * JWT it accepts (scopes read report); the server verifies it on the first request and answers
 * it from its cache after.
 */
async function benchJwt(tmp) {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwks = path.join(tmp, 'jwks.json');
  const key = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'RS256', use: 'sig' };
  fs.writeFileSync(jwks, JSON.stringify({ keys: [key] }));
  const issuer = 'https://kubernetes.default.svc.cluster.local';
  const config = path.join(tmp, 'circuitlog-jwt.yaml');
  fs.writeFileSync(config, `auth:\n  jwt:\n    jwks_file: ${jwks}\n    issuer: ${issuer}\n    audience: circuitlog\n`);
  const token = await new SignJWT({ sub: 'system:serviceaccount:bench:client', scope: 'read report' })
    .setProtectedHeader({ alg: 'RS256', kid: 'bench' })
    .setIssuer(issuer)
    .setAudience('circuitlog')
    .setExpirationTime('2h')
    .sign(privateKey);
  return { config, token };
}

/**
 * Issue 30: the same build three times more, one with CIRCUITLOG_TOKEN, one with a credentials
 * file of CREDENTIALS entries (scopes read, report, configure: a credential the route table is
 * asked about) and one with `auth.jwt` (benchJwt), each with bench-ok set up; GET /allowed is
 * sent with the token / the 50th credential's / the JWT.
 */
async function startAuthServers(tmp, procs) {
  const file = path.join(tmp, 'credentials.json');
  const sha256 = (t) => createHash('sha256').update(t).digest('hex');
  const credentials = Array.from({ length: CREDENTIALS }, (_, i) => ({
    id: `service-${i}`,
    token_sha256: sha256(credentialToken(i)),
    scopes: ['read', 'report', 'configure'],
  }));
  fs.writeFileSync(file, JSON.stringify({ credentials }));
  const jwt = await benchJwt(tmp);
  const servers = {};
  for (const [id, env, token] of [
    ['token', { CIRCUITLOG_TOKEN: BENCH_TOKEN }, BENCH_TOKEN],
    ['credential', { CIRCUITLOG_CREDENTIALS: file }, credentialToken(CREDENTIALS / 2)],
    ['jwt', { CIRCUITLOG_CONFIG: jwt.config }, jwt.token],
  ]) {
    const server = await startCircuitlog({
      name: `circuitlog-${id}`,
      db: path.join(tmp, `${id}.db`),
      logLevel: 'warn',
      env,
    });
    procs.push(server);
    const headers = { authorization: `Bearer ${token}` };
    await probeOk(`${server.url}/circuits/bench-ok/outcomes`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, ...headers },
      body: OK_BODY,
    });
    await probeOk(`${server.url}/circuits/bench-ok/allowed`, { headers });
    log(`circuitlog with ${id} pid ${server.pid} on ${server.url}`);
    servers[id] = { url: `${server.url}/circuits/bench-ok/allowed`, base: server.url, headers, pid: server.pid };
  }
  return servers;
}

function startUpstream() {
  return startProcess({
    name: 'upstream-server',
    args: [path.join(benchDir, 'upstream-server.mjs')],
    cwd: repoRoot,
    env: { HOST: LOOPBACK, PORT: '0', UPSTREAM_BYTES: String(upstreamBytes) },
  });
}

/**
 * A circuitlog config with one upstream `bench` of one node: the loopback upstream; with
 * `guarded`, also `bench-guarded` (issue 17's guard rails, which a BENCH_BASELINE_DIST build
 * from before them refuses as unknown keys).
 */
function writeProxyConfig(dir, upstreamUrl, guarded = true) {
  const file = path.join(dir, guarded ? 'circuitlog-proxy.yaml' : 'circuitlog-proxy-plain.yaml');
  fs.writeFileSync(
    file,
    [
      '# generated by bench/run.mjs',
      'local_dc: dc1',
      'upstreams:',
      '  bench:',
      '    nodes:',
      `      - { id: n1, dc: dc1, url: "${upstreamUrl}" }`,
      '    health_check: { enabled: true, path: /health, interval_ms: 60000, timeout_ms: 2000 }',
      ...(guarded
        ? [
            '  bench-guarded:', // the same node with the issue 17 guard rails on: the proxy GET must not slow down
            '    nodes:',
            `      - { id: n1, dc: dc1, url: "${upstreamUrl}" }`,
            '    health_check: { enabled: true, path: /health, interval_ms: 60000, timeout_ms: 2000 }',
            '    max_ejection_percent: 50',
            '    panic_threshold_percent: 50',
          ]
        : []),
      '',
    ].join('\n'),
  );
  return file;
}

/** Create bench-ok (closed) and bench-fail (threshold 1e9: stays closed, every failure writes); return answer sizes. */
async function setupBenchCircuits(baseUrl) {
  const u = (p) => `${baseUrl}${p}`;
  await probeOk(u('/circuits/bench-ok/outcomes'), { method: 'POST', headers: JSON_HEADERS, body: OK_BODY });
  await probeOk(u('/circuits/bench-fail/call'), {
    method: 'POST',
    headers: JSON_HEADERS,
    body: '{"success":false,"threshold":1000000000}',
  });
  const getAllowed = await probeOk(u('/circuits/bench-ok/allowed'));
  const postOk = await probeOk(u('/circuits/bench-ok/outcomes'), {
    method: 'POST',
    headers: JSON_HEADERS,
    body: OK_BODY,
  });
  const postFail = await probeOk(u('/circuits/bench-fail/outcomes'), {
    method: 'POST',
    headers: JSON_HEADERS,
    body: FAIL_BODY,
  });
  if (JSON.parse(postFail.body).state !== 'closed') throw new Error(`bench-fail is not closed: ${postFail.body}`);
  return { getAllowed: getAllowed.bytes, postOk: postOk.bytes, postFail: postFail.bytes };
}

async function circuitState(baseUrl, name) {
  const c = JSON.parse((await probeOk(`${baseUrl}/circuits/${encodeURIComponent(name)}`)).body);
  return { name, state: c.state, failure_count: c.failure_count };
}

const failTarget = (id, label, baseUrl, pid) => ({
  id,
  label,
  url: `${baseUrl}/circuits/bench-fail/outcomes`,
  method: 'POST',
  headers: JSON_HEADERS,
  body: FAIL_BODY,
  pid,
});

const suiteOptions = (durationSec) => ({ tool, connections, durationSec, warmupSec, rounds, log });

// ---------------------------------------------------------------------------
// Sections. Each returns {id, title, durationSec, results, notes[], checks[]} and stops its processes.

async function apiSection() {
  const durationSec = durationFor('api');
  const tmp = tempDir('circuitlog-bench-api-');
  const procs = [];
  try {
    // circuitlog at warn level does not print its "listening" line, so give it a port and poll /health.
    const server = await startCircuitlog({
      name: 'circuitlog',
      db: path.join(tmp, 'bench.db'),
      logLevel: 'warn',
      config: process.env.BENCH_CIRCUITLOG_CONFIG ?? '',
      synchronous: process.env.BENCH_SYNCHRONOUS ?? '',
    });
    procs.push(server);
    log(`circuitlog pid ${server.pid} on ${server.url}`);
    const u = (p) => `${server.url}${p}`;
    const sizes = await setupBenchCircuits(server.url);
    let base = null; // the BENCH_BASELINE_DIST build, same settings, its own database
    if (baselineDist !== null) {
      base = await startCircuitlog({
        name: 'circuitlog-baseline',
        db: path.join(tmp, 'baseline.db'),
        logLevel: 'warn',
        config: process.env.BENCH_CIRCUITLOG_CONFIG ?? '',
        synchronous: process.env.BENCH_SYNCHRONOUS ?? '',
        main: baselineDist,
      });
      procs.push(base);
      log(`circuitlog baseline build (${baselineDist}) pid ${base.pid} on ${base.url}`);
      await setupBenchCircuits(base.url);
    }
    log(`real answer sizes (bytes): ${JSON.stringify(sizes)}`);
    const authed = only.apiIds.has('get') || only.apiIds.has('ok') ? await startAuthServers(tmp, procs) : null;

    const bare = await startProcess({
      name: 'bare-server',
      args: [path.join(benchDir, 'bare-server.mjs')],
      cwd: repoRoot,
      env: {
        HOST: LOOPBACK,
        PORT: '0',
        BARE_ROUTES: JSON.stringify([
          { method: 'GET', path: '/bare', bytes: sizes.getAllowed },
          { method: 'POST', path: '/bare', bytes: sizes.postOk, parseJson: true },
          { method: 'POST', path: '/bare-fail', bytes: sizes.postFail, parseJson: true },
        ]),
      },
    });
    procs.push(bare);
    log(`bare-server pid ${bare.pid} on ${bare.url}`);
    // node:http alone, no Hono and no work: the ceiling any route on node:http can reach (the
    // `get` section's third line, informative: what the /allowed goal is measured against).
    const floor = only.apiIds.has('get')
      ? await startProcess({
          name: 'node-http-floor',
          args: [path.join(benchDir, 'bare-server.mjs')],
          cwd: repoRoot,
          env: {
            HOST: LOOPBACK,
            PORT: '0',
            BARE_RAW: '1',
            BARE_ROUTES: JSON.stringify([{ method: 'GET', path: '/bare', bytes: sizes.getAllowed }]),
          },
        })
      : null;
    if (floor !== null) procs.push(floor);
    const b = (p) => `${bare.url}${p}`;
    for (const [p, init, want] of [
      ['/bare', undefined, sizes.getAllowed],
      ['/bare', { method: 'POST', headers: JSON_HEADERS, body: OK_BODY }, sizes.postOk],
      ['/bare-fail', { method: 'POST', headers: JSON_HEADERS, body: FAIL_BODY }, sizes.postFail],
    ]) {
      const r = await probeOk(b(p), init);
      if (r.bytes !== want) throw new Error(`bare ${p}: ${r.bytes} bytes, want ${want}`);
    }

    const scenarios = [
      {
        id: 'get',
        title: 'GET allowed',
        baseline: 'bare',
        targets: [
          { id: 'bare', label: `bare GET /bare (${sizes.getAllowed} B)`, url: b('/bare'), pid: bare.pid },
          {
            id: 'circuitlog',
            label: 'GET /circuits/bench-ok/allowed',
            url: u('/circuits/bench-ok/allowed'),
            goal: 1.2, // issue 27: answered from memory on Node's request, past @hono/node-server and Hono
            pid: server.pid,
          },
          ...(floor === null
            ? []
            : [
                {
                  id: 'node-http',
                  label: `node:http alone, no Hono, no work: GET /bare (${sizes.getAllowed} B)`,
                  url: `${floor.url}/bare`,
                  pid: floor.pid,
                },
              ]),
          ...(base === null
            ? []
            : [
                {
                  id: 'baseline-build',
                  label: 'GET /circuits/bench-ok/allowed, BENCH_BASELINE_DIST build',
                  url: `${base.url}/circuits/bench-ok/allowed`,
                  pid: base.pid,
                },
              ]),
          ...(authed === null
            ? []
            : [
                { id: 'token', label: 'GET /circuits/bench-ok/allowed with CIRCUITLOG_TOKEN', ...authed.token },
                {
                  id: 'credential',
                  label: `GET /circuits/bench-ok/allowed with a named credential (file of ${CREDENTIALS})`,
                  ...authed.credential,
                },
                { id: 'jwt', label: 'GET /circuits/bench-ok/allowed with a JWT (cached)', ...authed.jwt },
              ]),
        ],
        comparisons: [
          ...(base === null
            ? []
            : [
                {
                  subject: 'circuitlog',
                  baseline: 'baseline-build',
                  goal: 0.95,
                  label: 'GET /allowed: this build vs the BENCH_BASELINE_DIST build',
                },
              ]),
          ...(authed === null
            ? []
            : [
                {
                  subject: 'credential',
                  baseline: 'token',
                  goal: 0.95, // issue 30: a named credential >= 0.95x the single-token build
                  label: `GET /allowed: a named credential (file of ${CREDENTIALS}) vs CIRCUITLOG_TOKEN, same build`,
                },
                {
                  subject: 'jwt',
                  baseline: 'token',
                  goal: 0.9, // issue 30: a JWT (cached) >= 0.9x the single-token build
                  label: 'GET /allowed: a JWT (cached) vs CIRCUITLOG_TOKEN, same build',
                },
              ]),
        ],
      },
      {
        id: 'ok',
        title: 'POST outcome success',
        baseline: 'bare',
        targets: [
          {
            id: 'bare',
            label: `bare POST /bare (${sizes.postOk} B)`,
            url: b('/bare'),
            method: 'POST',
            headers: JSON_HEADERS,
            body: OK_BODY,
            pid: bare.pid,
          },
          {
            id: 'circuitlog',
            label: 'POST /circuits/bench-ok/outcomes {"success":true}',
            url: u('/circuits/bench-ok/outcomes'),
            method: 'POST',
            headers: JSON_HEADERS,
            body: OK_BODY,
            goal: 0.8,
            pid: server.pid,
          },
          // Issue 30: outcome intake with a named credential (its caller: the credential's id) vs CIRCUITLOG_TOKEN.
          ...(authed === null
            ? []
            : ['token', 'credential'].map((id) => ({
                id: `${id}-outcome`,
                label: `POST /circuits/bench-ok/outcomes {"success":true} with ${id === 'token' ? 'CIRCUITLOG_TOKEN' : `a named credential (file of ${CREDENTIALS})`}`,
                url: `${authed[id].base}/circuits/bench-ok/outcomes`,
                method: 'POST',
                headers: { ...JSON_HEADERS, ...authed[id].headers },
                body: OK_BODY,
                pid: authed[id].pid,
              }))),
        ],
        comparisons:
          authed === null
            ? []
            : [
                {
                  subject: 'credential-outcome',
                  baseline: 'token-outcome',
                  goal: 0.9, // issue 30: outcome intake with credentials >= 0.9x
                  label: `POST outcome: a named credential (file of ${CREDENTIALS}) vs CIRCUITLOG_TOKEN, same build`,
                },
              ],
      },
      {
        id: 'fail',
        title: 'POST outcome failure (write)',
        baseline: 'bare',
        targets: [
          {
            id: 'bare',
            label: `bare POST /bare-fail (${sizes.postFail} B)`,
            url: b('/bare-fail'),
            method: 'POST',
            headers: JSON_HEADERS,
            body: FAIL_BODY,
            pid: bare.pid,
          },
          {
            ...failTarget('circuitlog', 'POST /circuits/bench-fail/outcomes {"success":false}', server.url, server.pid),
            goal: 0.6,
          },
        ],
      },
    ].filter((s) => only.apiIds.has(s.id));

    const results = await runSuite(scenarios, suiteOptions(durationSec));

    // The failure circuit must still be closed, or the failure runs were not all writes.
    const after = await circuitState(server.url, 'bench-fail');
    const checks = [
      {
        what: 'bench-fail stayed closed (every failure run was a closed-state write)',
        ok: after.state === 'closed',
        detail: `state ${after.state}, failure_count ${after.failure_count}`,
      },
    ];
    return {
      id: 'api',
      title: 'API routes vs bare Hono',
      durationSec,
      results,
      sizes,
      notes: [
        `circuitlog: 1 process, log level warn, synchronous ${process.env.BENCH_SYNCHRONOUS || 'NORMAL'}, DB in ${tmp} (${fsType(tmp)}).`,
      ],
      checks,
    };
  } finally {
    await stopEach(procs);
    removeTemp(tmp);
  }
}

async function proxySection() {
  const durationSec = durationFor('proxy');
  const tmp = tempDir('circuitlog-bench-proxy-');
  const procs = [];
  const notes = [];
  try {
    const upstream = await startUpstream();
    procs.push(upstream);
    log(`upstream-server pid ${upstream.pid} on ${upstream.url}`);
    const config = writeProxyConfig(tmp, upstream.url);
    const server = await startCircuitlog({
      name: 'circuitlog-proxy',
      db: path.join(tmp, 'proxy.db'),
      config,
      workers: proxyWorkers,
    });
    procs.push(server);
    log(`circuitlog (proxy) pid ${server.pid} on ${server.url}`);
    let base = null; // the BENCH_BASELINE_DIST build's proxy, same config
    if (baselineDist !== null) {
      base = await startCircuitlog({
        name: 'circuitlog-proxy-baseline',
        db: path.join(tmp, 'proxy-baseline.db'),
        config: writeProxyConfig(tmp, upstream.url, false),
        workers: proxyWorkers,
        main: baselineDist,
      });
      procs.push(base);
      log(`circuitlog (proxy) baseline build pid ${base.pid} on ${base.url}`);
    }
    const bare = await startFeatureless(upstream.url, proxyWorkers);
    procs.push(bare);
    const hp = await startProcess({
      name: 'http-proxy-server',
      args: [path.join(benchDir, 'http-proxy-server.mjs')],
      cwd: repoRoot,
      env: { HOST: LOOPBACK, PORT: '0', PROXY_TARGET: upstream.url },
    });
    procs.push(hp);
    const hpAgent = hp.logs.find((e) => e.event === 'listening')?.agent ?? {};
    log(`http-proxy-server pid ${hp.pid} on ${hp.url}`);

    const nginxBin = findNginx();
    let nginx = null;
    let nginxSkip = null;
    if (nginxBin === null)
      nginxSkip = process.env.BENCH_NGINX === '0' ? 'disabled with BENCH_NGINX=0' : 'nginx not installed';
    else {
      try {
        nginx = await startNginx({ bin: nginxBin, dir: path.join(tmp, 'nginx'), upstreamPort: upstream.port });
        procs.push(nginx);
        log(`nginx pid ${nginx.pid} (workers ${nginx.pids().slice(1).join(',')}) on ${nginx.url}`);
      } catch (error) {
        nginxSkip = `nginx failed to start: ${String(error.message).split('\n').slice(0, 3).join(' ')}`;
        log(`warning: ${nginxSkip}`);
      }
    }

    // Same body through every path.
    const direct = await probeOk(`${upstream.url}${PROXY_PATH}`);
    const viaCl = await probeOk(`${server.url}/proxy/bench${PROXY_PATH}`);
    if (viaCl.body !== direct.body || viaCl.headers['x-node'] !== 'n1')
      throw new Error(`circuitlog /proxy answered differently: ${JSON.stringify(viaCl).slice(0, 400)}`);
    const viaGuarded = await probeOk(`${server.url}/proxy/bench-guarded${PROXY_PATH}`);
    if (viaGuarded.body !== direct.body || viaGuarded.headers['x-degraded'] !== 'false')
      throw new Error(
        `circuitlog /proxy/bench-guarded answered differently: ${JSON.stringify(viaGuarded).slice(0, 400)}`,
      );
    if ((await probeOk(`${bare.url}${PROXY_PATH}`)).body !== direct.body)
      throw new Error('featureless proxy answered differently');
    const viaHp = await probeOk(`${hp.url}${PROXY_PATH}`);
    if (viaHp.body !== direct.body) throw new Error(`http-proxy answered differently: ${viaHp.body.slice(0, 200)}`);
    if (nginx) {
      const viaNginx = await probeOk(`${nginx.url}${PROXY_PATH}`);
      if (viaNginx.body !== direct.body) throw new Error(`nginx answered differently: ${viaNginx.body.slice(0, 200)}`);
    }
    const before = await circuitState(server.url, NODE_CIRCUIT);

    const targets = [
      {
        id: 'direct',
        label: `upstream direct GET ${PROXY_PATH} (${direct.bytes} B)`,
        url: `${upstream.url}${PROXY_PATH}`,
        pid: upstream.pid,
      },
      {
        id: 'featureless',
        label: `featureless Node proxy (node:http + undici Pool.stream), ${proxyWorkers} process(es)`,
        url: `${bare.url}${PROXY_PATH}`,
        pid: () => bare.pids(),
      },
      {
        id: 'circuitlog',
        label: `circuitlog GET /proxy/bench${PROXY_PATH}, ${proxyWorkers} worker(s)`,
        url: `${server.url}/proxy/bench${PROXY_PATH}`,
        pid: () => server.pids(),
      },
      {
        id: 'circuitlog-guarded',
        label: 'circuitlog, the same upstream with max_ejection_percent 50 + panic_threshold_percent 50',
        url: `${server.url}/proxy/bench-guarded${PROXY_PATH}`,
        pid: () => server.pids(),
      },
      { id: 'http-proxy', label: 'node-http-proxy (keep-alive agent)', url: `${hp.url}${PROXY_PATH}`, pid: hp.pid },
    ];
    if (nginx)
      targets.push({
        id: 'nginx',
        label: 'nginx, 1 worker (upstream keepalive 32)',
        url: `${nginx.url}${PROXY_PATH}`,
        pid: () => nginx.pids(),
      });
    if (base) {
      const viaBase = await probeOk(`${base.url}/proxy/bench${PROXY_PATH}`);
      if (viaBase.body !== direct.body)
        throw new Error(`baseline build /proxy answered differently: ${viaBase.body.slice(0, 200)}`);
      targets.push({
        id: 'baseline-build',
        label: `circuitlog GET /proxy/bench${PROXY_PATH}, BENCH_BASELINE_DIST build`,
        url: `${base.url}/proxy/bench${PROXY_PATH}`,
        pid: () => base.pids(),
      });
    }
    const scenarios = [
      {
        id: 'proxy',
        title: 'proxy GET',
        baseline: 'direct',
        targets,
        comparisons: [
          {
            subject: 'circuitlog',
            baseline: 'featureless',
            goal: 0.85,
            label: 'circuitlog /proxy vs featureless Node proxy',
          },
          { subject: 'circuitlog', baseline: 'http-proxy', goal: 1.2, label: 'circuitlog /proxy vs node-http-proxy' },
          {
            subject: 'circuitlog',
            baseline: 'nginx',
            goal: 0.5,
            label: 'circuitlog /proxy vs nginx (1 worker)',
            skipped: nginxSkip ?? undefined,
          },
          { subject: 'circuitlog', baseline: 'direct', label: 'circuitlog /proxy vs upstream direct' },
          {
            subject: 'circuitlog-guarded',
            baseline: 'circuitlog',
            goal: 0.95,
            label: 'circuitlog /proxy with the guard rails vs without (same run)',
          },
          ...(base
            ? [
                {
                  subject: 'baseline-build',
                  baseline: 'featureless',
                  label: 'BENCH_BASELINE_DIST build /proxy vs featureless Node proxy (reference)',
                },
                {
                  subject: 'circuitlog',
                  baseline: 'baseline-build',
                  label: 'circuitlog /proxy: this build vs the BENCH_BASELINE_DIST build',
                },
              ]
            : []),
        ],
      },
    ];
    // The two circuitlog rows share one process, idle while the other targets run: each
    // measured run starts from its steady state, not from a process that just woke up.
    const results = await runSuite(scenarios, { ...suiteOptions(durationSec), settleSec: proxySettleSec });

    const after = await circuitState(server.url, NODE_CIRCUIT);
    const checks = [
      {
        what: `node circuit ${NODE_CIRCUIT} stayed closed with no failures (breaker bookkeeping on, no upstream errors)`,
        ok: after.state === 'closed' && after.failure_count === 0,
        detail: `before: ${before.state}/${before.failure_count}, after: ${after.state}/${after.failure_count}`,
      },
    ];
    notes.push(
      `One upstream process (bench/upstream-server.mjs, plain node:http, keep-alive, ${direct.bytes}-byte JSON body) behind every proxy; all on ${LOOPBACK}.`,
      `circuitlog: CIRCUITLOG_WORKERS=1, log level info, upstream \`bench\` with one node (local_dc dc1), health checks enabled every 60 s, default retries/timeouts; every request runs the node's breaker check + record.`,
      `node-http-proxy ${httpProxyVersion()}: createProxyServer({target, xfwd: true, agent}) with http.Agent ${JSON.stringify(hpAgent)}.`,
      nginx
        ? `${nginxVersion(nginxBin)}: worker_processes 1 (+ master), access_log off, upstream keepalive 32, proxy_http_version 1.1, Connection "", keepalive_requests 1000000 (client and upstream side)${process.getuid?.() === 0 ? ', user root' : ''}; CPU µs/req counts master + worker.`
        : `nginx row skipped: ${nginxSkip}.`,
      'CPU µs/req counts the proxy process only; the upstream spends its own CPU on every proxied request too (see the direct row).',
      proxySettleSec > 0
        ? `Each measured run follows an unmeasured ${proxySettleSec} s run on the same target (BENCH_PROXY_SETTLE): a process idle while the others ran re-optimises its hot code first.`
        : 'No settling run before the measured ones (BENCH_PROXY_SETTLE=0): the first run after a process sat idle pays for re-optimising its code.',
    );
    return {
      id: 'proxy',
      title: 'Proxy GET: circuitlog vs node-http-proxy vs nginx',
      durationSec,
      results,
      notes,
      checks,
      nginxConf: nginx?.conf,
    };
  } finally {
    await stopEach(procs.reverse());
    removeTemp(tmp);
  }
}

/** bench/featureless-proxy.mjs: the featureless Node proxy (issue 12's baseline). */
function startFeatureless(target, workers) {
  const args = [path.join(benchDir, 'featureless-proxy.mjs')];
  return startProcess({
    name: 'featureless-proxy',
    args,
    cwd: repoRoot,
    port: 'auto',
    env: { HOST: LOOPBACK, PROXY_TARGET: target, PROXY_WORKERS: String(workers) },
  });
}

function httpProxyVersion() {
  try {
    return createRequire(import.meta.url)('http-proxy/package.json').version;
  } catch {
    return '?';
  }
}

async function workersSection() {
  const durationSec = durationFor('workers');
  const tmp = tempDir('circuitlog-bench-workers-');
  const procs = [];
  try {
    const upstream = await startUpstream();
    procs.push(upstream);
    const config = writeProxyConfig(tmp, upstream.url);
    const w1 = await startCircuitlog({ name: 'circuitlog-w1', db: path.join(tmp, 'w1.db'), config, workers: 1 });
    procs.push(w1);
    const w2 = await startCircuitlog({ name: 'circuitlog-w2', db: path.join(tmp, 'w2.db'), config, workers: 2 });
    procs.push(w2);
    const w2pids = w2.pids();
    log(
      `circuitlog 1 worker pid ${w1.pid} on ${w1.url}; 2 workers primary ${w2.pid} (workers ${w2pids.slice(1).join(',')}) on ${w2.url}`,
    );
    if (w2pids.length < 3) throw new Error(`expected a primary and 2 workers, found pids ${w2pids.join(',')}`);
    for (const s of [w1, w2]) {
      await setupBenchCircuits(s.url);
      await probeOk(`${s.url}/proxy/bench${PROXY_PATH}`);
    }
    const w2cpu = () => w2.pids();
    const scenarios = [
      {
        id: 'workers-get',
        title: 'workers: GET allowed',
        baseline: 'w1',
        targets: [
          {
            id: 'w1',
            label: '1 worker: GET /circuits/bench-ok/allowed',
            url: `${w1.url}/circuits/bench-ok/allowed`,
            pid: w1.pid,
          },
          {
            id: 'w2',
            label: '2 workers: GET /circuits/bench-ok/allowed',
            url: `${w2.url}/circuits/bench-ok/allowed`,
            pid: w2cpu,
          },
        ],
      },
      {
        id: 'workers-fail',
        title: 'workers: POST outcome failure (write)',
        baseline: 'w1',
        targets: [
          failTarget('w1', '1 worker: POST /circuits/bench-fail/outcomes', w1.url, w1.pid),
          failTarget('w2', '2 workers: POST /circuits/bench-fail/outcomes', w2.url, w2cpu),
        ],
      },
      {
        id: 'workers-proxy',
        title: 'workers: proxy GET',
        baseline: 'w1',
        targets: [
          {
            id: 'w1',
            label: `1 worker: GET /proxy/bench${PROXY_PATH}`,
            url: `${w1.url}/proxy/bench${PROXY_PATH}`,
            pid: w1.pid,
          },
          {
            id: 'w2',
            label: `2 workers: GET /proxy/bench${PROXY_PATH}`,
            url: `${w2.url}/proxy/bench${PROXY_PATH}`,
            pid: w2cpu,
          },
        ],
      },
    ];
    const results = await runSuite(scenarios, suiteOptions(durationSec));
    const checks = [];
    for (const [label, s] of [
      ['1 worker', w1],
      ['2 workers', w2],
    ]) {
      const fail = await circuitState(s.url, 'bench-fail');
      const node = await circuitState(s.url, NODE_CIRCUIT);
      checks.push({
        what: `${label}: bench-fail stayed closed`,
        ok: fail.state === 'closed',
        detail: `failure_count ${fail.failure_count}`,
      });
      checks.push({
        what: `${label}: ${NODE_CIRCUIT} closed, no failures`,
        ok: node.state === 'closed' && node.failure_count === 0,
        detail: `${node.state}/${node.failure_count}`,
      });
    }
    return {
      id: 'workers',
      title: 'Workers: CIRCUITLOG_WORKERS=1 vs 2 (ratio = 2 workers / 1 worker; informative)',
      durationSec,
      results,
      notes: [
        'No goal. The load generator (wrk, 1 thread) shares the 2 cores with the workers (and, for the proxy rows, the upstream process), so 2 workers cannot reach 2x here.',
        '1 worker holds the SQLite file exclusively (locking_mode=EXCLUSIVE, no freshness check); with 2 workers every request checks PRAGMA data_version and writes take the file lock.',
        'CPU µs/req for 2 workers counts the primary and both workers.',
      ],
      checks,
    };
  } finally {
    await stopEach(procs.reverse());
    removeTemp(tmp);
  }
}

async function durabilitySection() {
  const durationSec = durationFor('durability');
  const tmp = tempDir('circuitlog-bench-durability-');
  const procs = [];
  try {
    const normal = await startCircuitlog({
      name: 'circuitlog-normal',
      db: path.join(tmp, 'normal.db'),
      synchronous: 'NORMAL',
    });
    procs.push(normal);
    const full = await startCircuitlog({ name: 'circuitlog-full', db: path.join(tmp, 'full.db'), synchronous: 'FULL' });
    procs.push(full);
    await setupBenchCircuits(normal.url);
    await setupBenchCircuits(full.url);
    const scenarios = [
      {
        id: 'durability',
        title: 'durability: POST outcome failure (write)',
        baseline: 'normal',
        targets: [
          failTarget('normal', 'CIRCUITLOG_SYNCHRONOUS=NORMAL', normal.url, normal.pid),
          failTarget('full', 'CIRCUITLOG_SYNCHRONOUS=FULL', full.url, full.pid),
        ],
      },
    ];
    const results = await runSuite(scenarios, suiteOptions(durationSec));
    const checks = [];
    for (const [label, s] of [
      ['NORMAL', normal],
      ['FULL', full],
    ]) {
      const fail = await circuitState(s.url, 'bench-fail');
      checks.push({
        what: `${label}: bench-fail stayed closed (every request a write)`,
        ok: fail.state === 'closed',
        detail: `failure_count ${fail.failure_count}`,
      });
    }
    const fs_ = fsType(tmp);
    return {
      id: 'durability',
      title: 'Durability: CIRCUITLOG_SYNCHRONOUS=NORMAL vs FULL (ratio = FULL / NORMAL; informative)',
      durationSec,
      results,
      dbDir: tmp,
      fsType: fs_,
      notes: [
        `DB files in ${tmp} (file system: ${fs_}, from \`stat -f -c %T\`); WAL mode, 1 worker (exclusive). NORMAL syncs the WAL at checkpoints only; FULL syncs it on every commit, so the ratio depends on this device's fsync cost.`,
      ],
      checks,
    };
  } finally {
    await stopEach(procs.reverse());
    removeTemp(tmp);
  }
}

// ---------------------------------------------------------------------------

function sectionMarkdown(sec) {
  const parts = [
    `### ${sec.title}`,
    '',
    `${sec.durationSec}s per run × ${rounds} round(s) (median), ${warmupSec}s warm-up per target.`,
    '',
  ];
  for (const n of sec.notes ?? []) parts.push(`- ${n}`);
  if (sec.notes?.length) parts.push('');
  if (sec.markdownExtra) parts.push(sec.markdownExtra, '');
  if (sec.results.length === 0) return parts.join('\n');
  parts.push(markdownTable(sec.results), '');
  const cmp = markdownComparisons(sec.results);
  if (cmp) parts.push(cmp, '');
  parts.push(markdownDetails(sec.results), '');
  for (const c of sec.checks ?? []) parts.push(`- check: ${c.what}: ${c.ok ? 'ok' : 'FAILED'} (${c.detail})`);
  return parts.join('\n');
}

async function main() {
  if (!fs.existsSync(dist)) throw new Error(`${dist} missing: run \`npm run build\` (npm run bench does)`);
  if (cpuProf) fs.mkdirSync(profDir, { recursive: true });
  const env = environmentInfo(tool);
  const nginxBin = findNginx();
  env.nginx = nginxBin ? nginxVersion(nginxBin) : null;
  const nginxNote =
    env.nginx ?? (process.env.BENCH_NGINX === '0' ? 'nginx skipped (BENCH_NGINX=0)' : 'nginx not installed');
  env.httpProxy = httpProxyVersion();
  env.tmpdir = os.tmpdir();
  env.tmpdirFs = fsType(env.tmpdir);
  log(
    `tool ${env.toolVersion}; node ${env.node}; ${env.cpus} CPUs (${env.cpuModel}); load ${env.loadavg.join(' ')}; ${env.nginx ?? 'no nginx'}`,
  );
  log(
    `sections ${[...only.sections].join(',')}; connections ${connections}, ${rounds} round(s), warm-up ${warmupSec}s`,
  );
  const startedAt = new Date().toISOString();
  const t0 = Date.now();

  // One set of helpers for every section; each takes what it needs.
  const ctx = {
    startCircuitlog,
    startProcess,
    setupBenchCircuits,
    tempDir,
    removeTemp,
    stopEach,
    suiteOptions,
    durationFor,
    envInt,
    log,
    runSuite,
    dist,
    repoRoot,
  };
  const withDuration = (id) => ({ ...ctx, durationSec: durationFor(id) });
  const runners = {
    api: apiSection,
    proxy: proxySection,
    workers: workersSection,
    durability: durabilitySection,
    policy: () => policySection(ctx),
    quorum: () => quorumSection(ctx),
    metrics: () => metricsSection(withDuration('metrics')),
    throttle: () => throttleSection(withDuration('throttle')),
    kinds: () => kindsSection(withDuration('kinds')),
    history: () => historySection(withDuration('history')),
    stalls: () => stallsSection(ctx),
    client: () => clientSection(withDuration('client')),
    python: () => pythonSection(withDuration('python')),
    edge: () => edgeSection(withDuration('edge')),
    scale: () => scaleSection({ ...ctx, skipFanout: only.sections.has('fanout') }), // the fanout section measures it once
    fanout: () => fanoutSection(ctx),
    overload: () => overloadSection(ctx),
    redis: () => redisSection(ctx),
    'redis-modes': () => redisModesSection(ctx),
    'redis-tls': () => redisTlsSection(ctx),
    backtest: () => backtestSection(ctx),
  };
  const sections = [];
  for (const id of SECTIONS) {
    if (!only.sections.has(id)) continue;
    log(`\n== section ${id} ==`);
    sections.push(await runners[id]());
  }
  const elapsedSec = (Date.now() - t0) / 1000;

  const header = [
    `node ${env.node} · ${env.cpus} CPUs (${env.cpuModel}) · ${env.platform} · load avg at start ${env.loadavg.join(' ')}`,
    `tool: ${env.toolVersion} · ${connections} connections · ${rounds} round(s) (median) · ${warmupSec}s warm-up · loopback · ${nginxNote} · http-proxy ${env.httpProxy} · tmpdir ${env.tmpdir} (${env.tmpdirFs})`,
  ].join('\n');
  const all = sections.flatMap((s) => s.results);
  const invalid =
    all.some((s) => s.targets.some((t) => !t.valid) || (s.comparisons ?? []).some((c) => !c.valid)) ||
    sections.some((s) => s.checks.some((c) => !c.ok));
  // A section's goals that are not req/s ratios (`goals: [{label, value, goal, met}]`, e.g. the edge section's).
  const sectionGoals = sections.flatMap((s) => s.goals ?? []);
  const missed =
    all.some((s) => s.targets.some((t) => t.met === false) || (s.comparisons ?? []).some((c) => c.met === false)) ||
    sectionGoals.some((g) => g.met === false);
  const body = sections.map(sectionMarkdown).join('\n\n');
  const verdict = invalid
    ? 'RESULT: INVALID — some runs had non-2xx answers or errors, or a check failed'
    : missed
      ? 'RESULT: some goals NOT met'
      : 'RESULT: all goals met';
  const goalLines =
    all
      .flatMap((s) => [
        ...s.targets
          .filter((t) => t.goal !== null)
          .map(
            (t) =>
              `${s.title} :: ${t.label}: ${fmt(t.ratio)}x (goal ≥ ${t.goal.toFixed(2)}x) ${t.met ? 'met' : 'NOT met'}`,
          ),
        ...(s.comparisons ?? [])
          .filter((c) => c.goal !== null)
          .map((c) =>
            c.skipped
              ? `${c.label}: skipped (${c.skipped})`
              : `${c.label}: ${fmt(c.ratio)}x (goal ≥ ${c.goal.toFixed(2)}x) ${c.met ? 'met' : 'NOT met'}`,
          ),
      ])
      .concat(sectionGoals.map((g) => `${g.label}: ${g.value} (goal ${g.goal}) ${g.met ? 'met' : 'NOT met'}`))
      .map((l) => `- ${l}`)
      .join('\n') || '- (no goals in the selected sections)';

  process.stdout.write(
    `\n${header}\n\n${body}\n\nGoals:\n${goalLines}\n\n${verdict} (benchmark time ${fmt(elapsedSec, 0)} s)\n`,
  );

  const out = {
    startedAt,
    finishedAt: new Date().toISOString(),
    elapsedSec,
    environment: env,
    settings: {
      connections,
      warmupSec,
      rounds,
      durations: Object.fromEntries(sections.map((s) => [s.id, s.durationSec])),
      only: process.env.BENCH_ONLY || null,
      cpuProf,
      upstreamBytes,
    },
    valid: !invalid,
    goalsMet: !invalid && !missed,
    sections: sections.map(({ results, ...rest }) => ({ ...rest, scenarios: results })),
    scenarios: all,
    markdown: `${header}\n\n${body}`,
  };
  writeJson(path.join(resultsDir, 'latest.json'), out);
  fs.writeFileSync(path.join(resultsDir, 'latest.md'), `${header}\n\n${body}\n\n${verdict}\n`);
  log(`wrote ${path.relative(repoRoot, path.join(resultsDir, 'latest.json'))} and latest.md`);
  await stopAll();
  if (cpuProf)
    log(
      `CPU profile(s) in ${path.relative(repoRoot, profDir)}; summarize with: node bench/profile-top.mjs ${path.relative(repoRoot, profDir)}`,
    );
  process.exitCode = invalid ? 1 : 0;
}

main()
  .catch(async (error) => {
    process.stderr.write(`bench failed: ${error.stack ?? error}\n`);
    await stopAll();
    process.exit(1);
  })
  .finally(() => stopAll());
