// `npm run bench`: circuitlog's hot routes vs a bare Hono route with a same-size JSON body.
//
// Env: BENCH_DURATION (s, default 8), BENCH_CONNECTIONS (32), BENCH_WARMUP (s, 2),
//      BENCH_ROUNDS (1), BENCH_TOOL (wrk|autocannon; default wrk when installed),
//      BENCH_WRK_THREADS (1), BENCH_ONLY (comma list of scenario ids: get,ok,fail),
//      BENCH_CPU_PROF=1 (server runs with --cpu-prof; profile in bench/results/prof/),
//      BENCH_SYNCHRONOUS (NORMAL|FULL, passed as CIRCUITLOG_SYNCHRONOUS).
// See bench/README.md.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  LOOPBACK,
  envInt,
  environmentInfo,
  makeTempDir,
  markdownDetails,
  markdownTable,
  pickTool,
  probeOk,
  runSuite,
  startProcess,
  stopAll,
  writeJson,
} from './lib.mjs';

const benchDir = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(benchDir, '..');
const resultsDir = path.join(benchDir, 'results');

const durationSec = envInt('BENCH_DURATION', 8, 1, 600);
const connections = envInt('BENCH_CONNECTIONS', 32, 1, 10_000);
const warmupSec = envInt('BENCH_WARMUP', 2, 0, 600);
const rounds = envInt('BENCH_ROUNDS', 1, 1, 50);
const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((s) => s.trim())) : null;
const cpuProf = process.env.BENCH_CPU_PROF === '1';
const tool = pickTool();
const log = (m) => process.stderr.write(`${m}\n`);

const JSON_HEADERS = { 'content-type': 'application/json' };
const OK_BODY = '{"success":true}';
const FAIL_BODY = '{"success":false}';

async function main() {
  const dist = path.join(repoRoot, 'dist', 'main.js');
  if (!fs.existsSync(dist)) throw new Error(`${dist} missing: run \`npm run build\` (npm run bench does)`);
  const tmp = makeTempDir();
  try {
    const profDir = path.join(resultsDir, 'prof');
    if (cpuProf) fs.mkdirSync(profDir, { recursive: true });

    // circuitlog at warn level does not print its "listening" line, so give it a port and poll /health.
    const server = await startProcess({
      name: 'circuitlog',
      args: [...(cpuProf ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []), dist],
      cwd: repoRoot,
      port: 'auto',
      readyPath: '/health',
      env: {
        HOST: LOOPBACK,
        CIRCUITLOG_DB: path.join(tmp, 'bench.db'),
        CIRCUITLOG_LOG_LEVEL: 'warn',
        CIRCUITLOG_CONFIG: process.env.BENCH_CIRCUITLOG_CONFIG ?? '',
        CIRCUITLOG_TOKEN: '',
        CIRCUITLOG_SYNCHRONOUS: process.env.BENCH_SYNCHRONOUS ?? '',
      },
    });
    log(`circuitlog pid ${server.pid} on ${server.url}`);

    // The bench circuits, and the real answer sizes for the bare twin.
    const u = (p) => `${server.url}${p}`;
    await probeOk(u('/circuits/bench-ok/outcomes'), { method: 'POST', headers: JSON_HEADERS, body: OK_BODY });
    await probeOk(u('/circuits/bench-fail/call'), { method: 'POST', headers: JSON_HEADERS, body: '{"success":false,"threshold":1000000000}' });
    const getAllowed = await probeOk(u('/circuits/bench-ok/allowed'));
    const postOk = await probeOk(u('/circuits/bench-ok/outcomes'), { method: 'POST', headers: JSON_HEADERS, body: OK_BODY });
    const postFail = await probeOk(u('/circuits/bench-fail/outcomes'), { method: 'POST', headers: JSON_HEADERS, body: FAIL_BODY });
    if (JSON.parse(postFail.body).state !== 'closed') throw new Error(`bench-fail is not closed: ${postFail.body}`);
    const sizes = { getAllowed: getAllowed.bytes, postOk: postOk.bytes, postFail: postFail.bytes };
    log(`real answer sizes (bytes): ${JSON.stringify(sizes)}`);

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
    log(`bare-server pid ${bare.pid} on ${bare.url}`);
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
          { id: 'circuitlog', label: 'GET /circuits/bench-ok/allowed', url: u('/circuits/bench-ok/allowed'), goal: 0.9, pid: server.pid },
        ],
      },
      {
        id: 'ok',
        title: 'POST outcome success',
        baseline: 'bare',
        targets: [
          { id: 'bare', label: `bare POST /bare (${sizes.postOk} B)`, url: b('/bare'), method: 'POST', headers: JSON_HEADERS, body: OK_BODY, pid: bare.pid },
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
        ],
      },
      {
        id: 'fail',
        title: 'POST outcome failure (write)',
        baseline: 'bare',
        targets: [
          { id: 'bare', label: `bare POST /bare-fail (${sizes.postFail} B)`, url: b('/bare-fail'), method: 'POST', headers: JSON_HEADERS, body: FAIL_BODY, pid: bare.pid },
          {
            id: 'circuitlog',
            label: 'POST /circuits/bench-fail/outcomes {"success":false}',
            url: u('/circuits/bench-fail/outcomes'),
            method: 'POST',
            headers: JSON_HEADERS,
            body: FAIL_BODY,
            goal: 0.6,
            pid: server.pid,
          },
        ],
      },
    ].filter((s) => !only || only.has(s.id));

    const env = environmentInfo(tool);
    log(`tool ${env.toolVersion}; node ${env.node}; ${env.cpus} CPUs (${env.cpuModel}); load ${env.loadavg.join(' ')}`);
    log(`connections ${connections}, duration ${durationSec}s x ${rounds} round(s), warm-up ${warmupSec}s`);
    const startedAt = new Date().toISOString();
    const results = await runSuite(scenarios, { tool, connections, durationSec, warmupSec, rounds, log });

    // The failure circuit must still be closed, or the failure runs were not all writes.
    const after = JSON.parse((await probeOk(u('/circuits/bench-fail'))).body);
    const failStillClosed = after.state === 'closed';

    const table = markdownTable(results);
    const details = markdownDetails(results);
    const header = [
      `node ${env.node} · ${env.cpus} CPUs (${env.cpuModel}) · ${env.platform}`,
      `tool: ${env.toolVersion} · ${connections} connections · ${durationSec}s per run × ${rounds} round(s) (median) · ${warmupSec}s warm-up · loopback`,
    ].join('\n');
    const invalid = results.some((s) => s.targets.some((t) => !t.valid)) || !failStillClosed;
    const missed = results.some((s) => s.targets.some((t) => t.met === false));

    process.stdout.write(`\n${header}\n\n${table}\n\n${details}\n\n`);
    if (!failStillClosed) process.stdout.write(`WARNING: bench-fail ended ${after.state}; failure runs were not all closed-state writes\n`);
    process.stdout.write(`bench-fail failure_count after the run: ${after.failure_count}\n`);
    if (invalid) process.stdout.write('RESULT: INVALID — some runs had non-2xx answers or errors\n');
    else process.stdout.write(missed ? 'RESULT: some goals NOT met\n' : 'RESULT: all goals met\n');

    const out = {
      startedAt,
      finishedAt: new Date().toISOString(),
      environment: env,
      settings: { connections, durationSec, warmupSec, rounds, only: only ? [...only] : null, cpuProf },
      sizes,
      failCircuitAfter: { state: after.state, failure_count: after.failure_count },
      valid: !invalid,
      goalsMet: !invalid && !missed,
      scenarios: results,
      markdown: `${header}\n\n${table}`,
    };
    writeJson(path.join(resultsDir, 'latest.json'), out);
    fs.writeFileSync(path.join(resultsDir, 'latest.md'), `${header}\n\n${table}\n\n${details}\n`);
    log(`wrote ${path.relative(repoRoot, path.join(resultsDir, 'latest.json'))} and latest.md`);

    await stopAll();
    if (cpuProf) log(`CPU profile(s) in ${path.relative(repoRoot, profDir)}; summarize with: node bench/profile-top.mjs ${path.relative(repoRoot, profDir)}`);
    process.exitCode = invalid ? 1 : 0;
  } finally {
    await stopAll();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

main().catch(async (error) => {
  process.stderr.write(`bench failed: ${error.stack ?? error}\n`);
  await stopAll();
  process.exit(1);
});

