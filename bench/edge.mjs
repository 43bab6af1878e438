// The `edge` section of `npm run bench` (BENCH_ONLY=edge; issue 32, "Proof"): the edge agent
// (`node dist/edge.js`) against circuitlog itself, one server and its agents on loopback:
//   1. `GET /circuits/bench-ok/allowed` (closed) through agent A vs the server's own, same tool and
//      connections, alternating rounds (goal: agent >= 1.0x the server);
//   2. the server process's CPU (/proc utime + stime) while agent A answers that load, against its
//      CPU while it answers the same load itself, per second of load (goal: < 5%);
//   3. the latency the agent adds: sequential GETs on one keep-alive connection each, interleaved,
//      p50 (reported; the load tool's p50 at full load too);
//   4. trip propagation: a failure outcome posted to the server opens `bench-trip` (threshold 1);
//      from the server's answer to every agent's `/allowed` answering 503 (tight polling, one
//      connection per agent), BENCH_EDGE_TRIPS rounds, the circuit reset between them and every
//      agent seen deciding it locally again (its /edge/stats local_decisions moving) before the
//      next (goal: p99 <= 250 ms); and the same tripped through agent A (from A's 202 to the others);
//   5. aggregation: BENCH_EDGE_REPORTERS (20) child processes (bench/edge-reporter.mjs) posting single
//      failure outcomes in a loop for the section's duration through one agent, then the same
//      directly to the server: the batches the server received per 10 ms (counted by a pass-through
//      proxy between that agent and the server, bench/edge-batch-counter.mjs; goal: at most one per
//      10 ms on average; the most in any 10 ms reported) and the server's CPU per outcome, through
//      the agent vs direct (goal: lower through the agent); every acknowledged outcome counted once.
// Env: BENCH_DURATION_EDGE (s per load run, default 5), BENCH_EDGE_AGENTS (3), BENCH_EDGE_TRIPS (50),
//      BENCH_EDGE_REPORTERS (20), BENCH_EDGE_LATENCY_N (2,000 requests each way).

import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { batchWindows } from './edge-windows.mjs';
import { LOOPBACK, fmt, median, percentileSorted, probeOk, processCpuMs, runLoad } from './lib.mjs';

const GOAL_RPS_RATIO = 1.0;
const GOAL_SERVER_CPU_SHARE = 0.05;
const GOAL_TRIP_P99_MS = 250;
const GOAL_BATCHES_PER_10MS = 1;
const THROUGH_A_TRIPS = 20;

const CLOSED = 'bench-ok';
const TRIP = 'bench-trip';
const AGG_EDGE = 'bench-agg-edge';
const AGG_DIRECT = 'bench-agg-direct';
const AGG_WARM = 'bench-agg-warm';
const WARM_MS = 1_000;
const JSON_HEADERS = { 'content-type': 'application/json' };
const FAIL_BODY = '{"success":false}';
const allowedPath = (name) => `/circuits/${encodeURIComponent(name)}/allowed`;

const benchDir = import.meta.dirname;
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const pct = (xs, p) => percentileSorted(sorted(xs), p);
const now = () => performance.timeOrigin + performance.now();

/** One request on a keep-alive pool: its status and parsed JSON body (null when not JSON). */
async function ask(pool, method, p, body) {
  const res = await pool.request({
    method,
    path: p,
    headers: body === undefined ? {} : JSON_HEADERS,
    body,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  const text = await res.body.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.statusCode, json, text };
}

const agentStats = async (pool) => (await ask(pool, 'GET', '/edge/stats')).json ?? {};

/** circuitlog's failure count for a circuit: /metrics (circuitlog_outcomes_total) when served, else failure_count. */
async function serverFailures(url, name) {
  const metrics = await fetch(`${url}/metrics`).then(
    (r) => (r.ok ? r.text() : ''),
    () => '',
  );
  const line = metrics
    .split('\n')
    .find(
      (l) =>
        l.startsWith('circuitlog_outcomes_total{') && l.includes(`circuit="${name}"`) && l.includes('kind="failure"'),
    );
  if (line !== undefined) return Number(line.trim().split(/\s+/).pop());
  const c = JSON.parse((await probeOk(`${url}/circuits/${encodeURIComponent(name)}`)).body);
  return c.failure_count;
}

function startAgent(ctx, name, serverUrl) {
  return ctx.startProcess({
    name,
    args: (port) => [
      path.join(ctx.repoRoot, 'dist', 'edge.js'),
      '--server',
      serverUrl,
      '--listen',
      `${LOOPBACK}:${port}`,
    ],
    cwd: ctx.repoRoot,
    port: 'auto',
    readyPath: '/health/ready', // 503 until it follows the server's event stream
    timeoutMs: 30_000,
    env: { CIRCUITLOG_TOKEN: '', CIRCUITLOG_CONFIG: '', CIRCUITLOG_LOG_LEVEL: 'warn' },
  });
}

/**
 * Until the agent answers `GET /allowed` on `name` with a 200 that it decided itself (its
 * /edge/stats local_decisions moved): its view holds the circuit, closed. False after 5 s.
 */
async function decidedLocally(pool, name) {
  const end = performance.now() + 5_000;
  while (performance.now() < end) {
    const before = await agentStats(pool);
    const r = await ask(pool, 'GET', allowedPath(name));
    const after = await agentStats(pool);
    if (r.status === 200 && after.local_decisions > before.local_decisions) return true;
    await sleep(2);
  }
  return false;
}

/** Poll `GET /allowed` on one connection until it answers `status`; the time it did, or null after `ms`. */
async function pollUntil(pool, name, status, ms) {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const r = await ask(pool, 'GET', allowedPath(name));
    if (r.status === status) return now();
  }
  return null;
}

// ---------------------------------------------------------------------------
// 1 + 2: GET /allowed through the agent vs the server, with the server's CPU

async function allowedLoad(ctx, opts, server, agent, agentPool) {
  const targets = [
    { id: 'server', label: `server: GET /circuits/${CLOSED}/allowed`, url: `${server.url}${allowedPath(CLOSED)}` },
    {
      id: 'agent',
      label: `agent A: GET /circuits/${CLOSED}/allowed (closed: decided locally)`,
      url: `${agent.url}${allowedPath(CLOSED)}`,
    },
  ];
  const once = async (t, seconds) => {
    const cpu0 = [processCpuMs(server.pid), processCpuMs(agent.pid)];
    const s0 = t.id === 'agent' ? await agentStats(agentPool) : null;
    const r = await runLoad({ tool: opts.tool, url: t.url, connections: opts.connections, durationSec: seconds });
    const cpu1 = [processCpuMs(server.pid), processCpuMs(agent.pid)];
    const s1 = t.id === 'agent' ? await agentStats(agentPool) : null;
    r.serverCpuMs = cpu1[0] - cpu0[0];
    r.agentCpuMs = cpu1[1] - cpu0[1];
    if (s0 && s1) {
      r.localDecisions = s1.local_decisions - s0.local_decisions;
      r.serverChecks = s1.server_checks - s0.server_checks;
    }
    return r;
  };
  const warm = Math.max(1, opts.warmupSec);
  for (const t of targets) {
    ctx.log(`edge: warm-up ${t.label} (${warm}s)`);
    await once(t, warm);
    await sleep(300);
  }
  const rounds = Math.max(2, opts.rounds);
  const runs = { server: [], agent: [] };
  for (let round = 0; round < rounds; round++) {
    for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
      ctx.log(`edge: round ${round + 1}/${rounds} ${t.label} (${opts.durationSec}s)`);
      const r = await once(t, opts.durationSec);
      ctx.log(
        `  ${fmt(r.rps, 0)} req/s  p50 ${fmt(r.p50)} ms  server CPU ${fmt(r.serverCpuMs, 0)} ms  agent CPU ${fmt(r.agentCpuMs, 0)} ms  non2xx ${r.non2xx}  errors ${r.errors + r.timeouts}`,
      );
      runs[t.id].push(r);
      await sleep(300);
    }
  }
  const summary = (t, isBaseline, base) => {
    const rs = runs[t.id];
    const own = (r) => (t.id === 'server' ? r.serverCpuMs : r.agentCpuMs);
    const out = {
      id: t.id,
      label: t.label,
      method: 'GET',
      url: t.url,
      goal: isBaseline ? null : GOAL_RPS_RATIO,
      expectsNon2xx: false,
      rps: median(rs.map((r) => r.rps)),
      p50: median(rs.map((r) => r.p50)),
      p99: median(rs.map((r) => r.p99)),
      // the details table's "process CPU µs/req": the process that answered (server or agent)
      cpuUsPerReq: median(rs.map((r) => (own(r) * 1000) / r.requests)),
      requests: rs.reduce((a, r) => a + r.requests, 0),
      non2xx: rs.reduce((a, r) => a + r.non2xx, 0),
      errors: rs.reduce((a, r) => a + r.errors + r.timeouts, 0),
      runs: rs,
      isBaseline,
      serverCpuMsPerSec: median(rs.map((r) => r.serverCpuMs / r.durationSec)),
      serverCpuUsPerReq: median(rs.map((r) => (r.serverCpuMs * 1000) / r.requests)),
      agentCpuUsPerReq: median(rs.map((r) => (r.agentCpuMs * 1000) / r.requests)),
    };
    out.ratio = base ? out.rps / base.rps : 1;
    out.valid = out.non2xx === 0 && out.errors === 0 && out.requests > 0 && (!base || base.valid);
    out.met = out.goal === null ? null : out.valid && out.ratio >= out.goal;
    return out;
  };
  const base = summary(targets[0], true, null);
  const subject = summary(targets[1], false, base);
  const local = runs.agent.reduce((a, r) => a + (r.localDecisions ?? Number.NaN), 0);
  return {
    scenario: {
      id: 'edge-allowed',
      title: 'edge: GET /allowed on a closed circuit, agent vs server',
      baseline: 'server',
      targets: [base, subject],
      comparisons: [],
    },
    serverCpuShare: subject.serverCpuMsPerSec / base.serverCpuMsPerSec,
    serverCpuShareUsPerReq: subject.serverCpuUsPerReq / base.serverCpuUsPerReq,
    local: { decisions: local, requests: subject.requests },
  };
}

// ---------------------------------------------------------------------------
// 3: added latency, sequential

async function addedLatency(serverPool, agentPool, n) {
  const server = new Float64Array(n);
  const agent = new Float64Array(n);
  let bad = 0;
  for (let i = 0; i < Math.min(200, n); i++) {
    await ask(serverPool, 'GET', allowedPath(CLOSED));
    await ask(agentPool, 'GET', allowedPath(CLOSED));
  }
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    if ((await ask(serverPool, 'GET', allowedPath(CLOSED))).status !== 200) bad++;
    server[i] = performance.now() - t;
    t = performance.now();
    if ((await ask(agentPool, 'GET', allowedPath(CLOSED))).status !== 200) bad++;
    agent[i] = performance.now() - t;
  }
  const s = [...server].sort((a, b) => a - b);
  const a = [...agent].sort((a_, b) => a_ - b);
  return {
    n,
    bad,
    serverP50: percentileSorted(s, 50),
    serverP99: percentileSorted(s, 99),
    agentP50: percentileSorted(a, 50),
    agentP99: percentileSorted(a, 99),
    addedP50: percentileSorted(a, 50) - percentileSorted(s, 50),
  };
}

// ---------------------------------------------------------------------------
// 4: trip propagation

/**
 * `rounds` trips of TRIP: `trip()` opens it and resolves with the time to measure from; then each
 * of `followers` is polled until its /allowed answers 503. Reset on the server between rounds,
 * and every agent seen deciding the circuit locally (closed) again before the next.
 */
async function tripRounds(ctx, { rounds, serverPool, all, followers, trip }) {
  const lags = [];
  const fromSend = [];
  let timeouts = 0;
  let notLocal = 0;
  for (let i = 0; i < rounds; i++) {
    for (const a of all) if (!(await decidedLocally(a.pool, TRIP))) notLocal++;
    const sent = now();
    const t0 = await trip();
    const seen = await Promise.all(followers.map((f) => pollUntil(f.pool, TRIP, 503, 5_000)));
    for (const t of seen) {
      if (t === null) timeouts++;
      else {
        lags.push(t - t0);
        fromSend.push(t - sent);
      }
    }
    const r = await ask(serverPool, 'POST', `/circuits/${TRIP}/reset`);
    if (r.status >= 300) throw new Error(`edge: reset of ${TRIP} answered ${r.status}: ${r.text.slice(0, 200)}`);
  }
  for (const a of all) if (!(await decidedLocally(a.pool, TRIP))) notLocal++;
  ctx.log(
    `edge: ${lags.length} trips seen, p50 ${fmt(pct(lags, 50))} ms p99 ${fmt(pct(lags, 99))} ms; ${timeouts} timeouts`,
  );
  return {
    samples: lags.length,
    timeouts,
    notLocal,
    p50: pct(lags, 50),
    p99: pct(lags, 99),
    max: Math.max(...lags),
    sendP50: pct(fromSend, 50),
    sendP99: pct(fromSend, 99),
  };
}

async function tripPropagation(ctx, { rounds, serverPool, agents }) {
  const all = agents.map((a) => ({ pool: a.pool }));
  const failure = async (pool, want) => {
    const r = await ask(pool, 'POST', `/circuits/${TRIP}/outcomes`, FAIL_BODY);
    if (r.status !== want) throw new Error(`edge: failure outcome answered ${r.status}: ${r.text.slice(0, 200)}`);
    return now();
  };
  ctx.log(`edge: trip propagation, ${rounds} trips posted to the server, ${agents.length} agents polled`);
  const viaServer = await tripRounds(ctx, {
    rounds,
    serverPool,
    all,
    followers: all,
    trip: () => failure(serverPool, 200),
  });
  ctx.log(`edge: trip propagation, ${THROUGH_A_TRIPS} trips through agent A, the other agents polled`);
  const viaAgent = await tripRounds(ctx, {
    rounds: THROUGH_A_TRIPS,
    serverPool,
    all,
    followers: all.slice(1),
    trip: () => failure(all[0].pool, 202),
  });
  return { viaServer, viaAgent };
}

// ---------------------------------------------------------------------------
// 5: aggregation

function forkReporters(n) {
  const children = Array.from({ length: n }, () =>
    fork(path.join(benchDir, 'edge-reporter.mjs'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  );
  const ready = Promise.all(
    children.map(
      (child) =>
        new Promise((resolve, reject) => {
          child.once('error', reject);
          child.once('exit', (code) => reject(new Error(`edge reporter exited ${code} before it was ready`)));
          child.once('message', (m) => m?.ready && resolve());
        }),
    ),
  );
  return { children, ready };
}

/** Every reporter posts to `origin + path` for `ms`; their summed counts. */
async function reportFor(children, origin, p, ms) {
  const counts = await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          child.once('message', resolve);
          child.send({ origin, path: p, body: FAIL_BODY, ms });
        }),
    ),
  );
  return counts.reduce((a, c) => ({ ok: a.ok + c.ok, bad: a.bad + c.bad, errors: a.errors + c.errors }), {
    ok: 0,
    bad: 0,
    errors: 0,
  });
}

async function aggregation(ctx, { server, durationSec, reporters }) {
  const counter = await ctx.startProcess({
    name: 'edge-batch-counter',
    args: [path.join(benchDir, 'edge-batch-counter.mjs')],
    cwd: ctx.repoRoot,
    env: { HOST: LOOPBACK, PORT: '0', TARGET: server.url },
  });
  const agent = await startAgent(ctx, 'edge-agent-aggregation', counter.url);
  const pool = new Pool(agent.url, { connections: 1 });
  const { children, ready } = forkReporters(reporters);
  try {
    await ready;
    for (const name of [AGG_EDGE, AGG_DIRECT])
      await probeOk(`${server.url}/circuits/${name}/outcomes`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: '{"success":true}',
      });
    const ms = durationSec * 1000;
    /** Until the agent has delivered everything it acknowledged since `stats0` (at most 15 s). */
    const drain = async (stats0, accepted) => {
      const end = performance.now() + 15_000;
      while (performance.now() < end) {
        const s = await agentStats(pool);
        if (s.outcomes_pending === 0 && s.outcomes_acknowledged - stats0.outcomes_acknowledged >= accepted) return true;
        await sleep(20);
      }
      return false;
    };
    // Unmeasured: fresh processes spend their first second compiling (undici's llhttp, the JIT).
    ctx.log(`edge: aggregation warm-up, ${reporters} processes, 1 s through the agent and 1 s direct`);
    const warm0 = await agentStats(pool);
    const warm = await reportFor(children, agent.url, `/circuits/${AGG_WARM}/outcomes`, WARM_MS);
    await drain(warm0, warm.ok);
    await reportFor(children, server.url, `/circuits/${AGG_WARM}/outcomes`, WARM_MS);
    const phase = async (label, origin, name) => {
      ctx.log(`edge: aggregation, ${reporters} processes posting single failure outcomes ${label} for ${durationSec}s`);
      const failures0 = await serverFailures(server.url, name);
      const stats0 = await agentStats(pool);
      await fetch(`${counter.url}/__bench/batches`).then((r) => r.arrayBuffer());
      const cpu0 = [processCpuMs(server.pid), processCpuMs(agent.pid)];
      const t0 = now();
      const counts = await reportFor(children, origin, `/circuits/${name}/outcomes`, ms);
      const loadMs = now() - t0;
      // Through the agent: until it has delivered what it acknowledged (bounded), so the server's
      // CPU for every outcome of the phase is counted.
      const drained = origin === agent.url ? await drain(stats0, counts.ok) : true;
      const cpu1 = [processCpuMs(server.pid), processCpuMs(agent.pid)];
      const stats1 = await agentStats(pool);
      const { batches } = await fetch(`${counter.url}/__bench/batches`).then((r) => r.json());
      const failures1 = await serverFailures(server.url, name);
      const received = failures1 - failures0;
      const serverCpuMs = cpu1[0] - cpu0[0];
      return {
        label,
        ...counts,
        loadMs,
        drained,
        received,
        outcomesPerSec: counts.ok / (loadMs / 1000),
        serverCpuMs,
        serverCpuUsPerOutcome: (serverCpuMs * 1000) / received,
        agentCpuUsPerOutcome: origin === agent.url ? ((cpu1[1] - cpu0[1]) * 1000) / received : null,
        batchesSent: stats1.batches_sent - stats0.batches_sent,
        batchTimes: batches.map((b) => b[0]),
        batchItems: batches.map((b) => b[1]),
      };
    };
    const edge = await phase('through one agent', agent.url, AGG_EDGE);
    const direct = await phase('directly to the server', server.url, AGG_DIRECT);
    const windows = batchWindows(edge.batchTimes, edge.loadMs);
    const items = sorted(edge.batchItems);
    const state = JSON.parse((await probeOk(`${server.url}/circuits/${AGG_EDGE}`)).body).state;
    const { batchTimes: _t, batchItems: _i, ...edgeOut } = edge;
    const { batchTimes: _t2, batchItems: _i2, ...directOut } = direct;
    return {
      reporters,
      edge: edgeOut,
      direct: directOut,
      windows,
      itemsP50: percentileSorted(items, 50),
      itemsMax: items.at(-1),
      itemsTotal: items.reduce((a, b) => a + b, 0),
      cpuRatio: edge.serverCpuUsPerOutcome / direct.serverCpuUsPerOutcome,
      edgeState: state,
    };
  } finally {
    for (const child of children) child.connected ? child.send('exit') : child.kill();
    await pool.close();
    await agent.stop();
    await counter.stop();
  }
}

// ---------------------------------------------------------------------------

const yesNo = (met) => (met ? 'yes' : 'NO');

function edgeMarkdown(m) {
  const { load, latency, trips, agg } = m;
  const s = load.scenario.targets[0];
  const a = load.scenario.targets[1];
  return [
    '| measure | through the agent | the server itself | agent / server | goal | met? |',
    '|---|---:|---:|---:|---:|:---:|',
    `| server CPU while \`GET /allowed\` is answered (ms of CPU per s of load) | ${fmt(a.serverCpuMsPerSec, 1)} | ${fmt(s.serverCpuMsPerSec, 1)} | ${fmt(load.serverCpuShare * 100, 2)}% | < ${GOAL_SERVER_CPU_SHARE * 100}% | ${yesNo(m.goals.cpu)} |`,
    `| server CPU µs per \`GET /allowed\` answered | ${fmt(a.serverCpuUsPerReq, 2)} | ${fmt(s.serverCpuUsPerReq, 2)} | ${fmt(load.serverCpuShareUsPerReq * 100, 2)}% | — | — |`,
    `| CPU µs per request of the process that answered (agent / server) | ${fmt(a.agentCpuUsPerReq, 1)} | ${fmt(s.cpuUsPerReq, 1)} | ${fmt(a.agentCpuUsPerReq / s.cpuUsPerReq)}x | — | — |`,
    `| sequential \`GET /allowed\` on one connection, p50 / p99 ms (${latency.n} each, interleaved) | ${fmt(latency.agentP50, 3)} / ${fmt(latency.agentP99, 3)} | ${fmt(latency.serverP50, 3)} / ${fmt(latency.serverP99, 3)} | added p50 ${fmt(latency.addedP50 * 1000, 0)} µs | reported | — |`,
    `| trip posted to the server → every agent's \`/allowed\` 503, p50 / p99 / max ms (${trips.viaServer.samples} samples) | ${fmt(trips.viaServer.p50)} / ${fmt(trips.viaServer.p99)} / ${fmt(trips.viaServer.max)} | — | — | p99 ≤ ${GOAL_TRIP_P99_MS} ms | ${yesNo(m.goals.trip)} |`,
    `| trip through agent A (its 202) → the other agents' 503, p50 / p99 ms (${trips.viaAgent.samples} samples) | ${fmt(trips.viaAgent.p50)} / ${fmt(trips.viaAgent.p99)} | — | — | reported | — |`,
    `| ${agg.reporters} processes' single outcomes: outcomes/s acknowledged | ${fmt(agg.edge.outcomesPerSec, 0)} | ${fmt(agg.direct.outcomesPerSec, 0)} | ${fmt(agg.edge.outcomesPerSec / agg.direct.outcomesPerSec)}x | — | — |`,
    `| batches the server received per 10 ms: average / most in any 10 ms (sliding; fixed slots) | ${fmt(agg.windows.avgPer10ms)} / ${agg.windows.maxSliding} (${agg.windows.maxFixed}) | — | — | ≤ ${GOAL_BATCHES_PER_10MS} on average | ${yesNo(m.goals.batches)} |`,
    `| items per batch p50 / max (${agg.windows.batches} batches, ${agg.itemsTotal} items) | ${fmt(agg.itemsP50, 0)} / ${agg.itemsMax ?? '–'} | — | — | — | — |`,
    `| server CPU µs per outcome received | ${fmt(agg.edge.serverCpuUsPerOutcome, 1)} | ${fmt(agg.direct.serverCpuUsPerOutcome, 1)} | ${fmt(agg.cpuRatio)}x | < 1.00x | ${yesNo(m.goals.aggCpu)} |`,
    `| agent CPU µs per outcome | ${fmt(agg.edge.agentCpuUsPerOutcome, 1)} | — | — | — | — |`,
  ].join('\n');
}

export async function edgeSection(ctx) {
  const durationSec = ctx.durationSec ?? ctx.durationFor('edge');
  const opts = ctx.suiteOptions(durationSec);
  const agentCount = ctx.envInt('BENCH_EDGE_AGENTS', 3, 2, 8);
  const rounds = ctx.envInt('BENCH_EDGE_TRIPS', 50, 1, 1_000);
  const reporters = ctx.envInt('BENCH_EDGE_REPORTERS', 20, 1, 100);
  const latencyN = ctx.envInt('BENCH_EDGE_LATENCY_N', 2_000, 10, 1_000_000);
  const title = 'Edge agent: GET /allowed through the agent vs the server, trip propagation, aggregation (issue 32)';
  if (!fs.existsSync(path.join(ctx.repoRoot, 'dist', 'edge.js')))
    return {
      id: 'edge',
      title,
      durationSec,
      results: [],
      notes: ['skipped: dist/edge.js missing (the edge agent is not in this build)'],
      checks: [],
    };
  const tmp = ctx.tempDir('circuitlog-bench-edge-');
  const procs = [];
  const pools = [];
  const pool = (url) => {
    const p = new Pool(url, { connections: 1 });
    pools.push(p);
    return p;
  };
  try {
    const config = path.join(tmp, 'circuitlog.yaml');
    fs.writeFileSync(
      config,
      [
        '# generated by bench/edge.mjs',
        'circuit_defaults:',
        '  failure_threshold: 1000000000', // the aggregation circuits take every failure and stay closed
        'circuits:',
        `  ${TRIP}:`,
        '    failure_threshold: 1',
        '    timeout_seconds: 3600',
        '',
      ].join('\n'),
    );
    const server = await ctx.startCircuitlog({
      name: 'circuitlog-edge',
      db: path.join(tmp, 'edge.db'),
      config,
      logLevel: 'warn',
    });
    procs.push(server);
    for (const name of [CLOSED, TRIP])
      await probeOk(`${server.url}/circuits/${name}/outcomes`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: '{"success":true}',
      });
    const agents = [];
    for (let i = 0; i < agentCount; i++) {
      const a = await startAgent(ctx, `edge-agent-${String.fromCharCode(65 + i)}`, server.url);
      procs.push(a);
      agents.push({ proc: a, pool: pool(a.url) });
    }
    ctx.log(`edge: server pid ${server.pid} on ${server.url}; agents ${agents.map((a) => a.proc.url).join(', ')}`);
    const serverPool = pool(server.url);
    for (const a of agents)
      for (const name of [CLOSED, TRIP])
        if (!(await decidedLocally(a.pool, name)))
          throw new Error(`edge: ${a.proc.url} does not decide ${name} locally within 5 s`);

    const A = agents[0];
    const load = await allowedLoad(ctx, opts, server, A.proc, A.pool);
    ctx.log(`edge: added latency, ${latencyN} sequential GET /allowed each way`);
    const latency = await addedLatency(serverPool, A.pool, latencyN);
    const trips = await tripPropagation(ctx, { rounds, serverPool, agents });
    const agg = await aggregation(ctx, { server, durationSec, reporters });

    const goals = {
      rps: load.scenario.targets[1].met === true,
      cpu: load.serverCpuShare < GOAL_SERVER_CPU_SHARE,
      trip: trips.viaServer.timeouts === 0 && trips.viaServer.p99 <= GOAL_TRIP_P99_MS,
      batches: agg.windows.avgPer10ms <= GOAL_BATCHES_PER_10MS,
      aggCpu: agg.cpuRatio < 1,
    };
    const metrics = { load: { ...load }, latency, trips, agg, goals };
    const a = load.scenario.targets[1];
    const checks = [
      {
        what: 'agent A decided the closed circuit itself (local_decisions ≥ 99% of its measured requests)',
        ok: load.local.decisions >= 0.99 * load.local.requests,
        detail: `${load.local.decisions} local decisions for ${load.local.requests} requests`,
      },
      {
        what: 'every trip reached every polled agent within 5 s, each agent deciding locally again after the reset',
        ok:
          trips.viaServer.timeouts + trips.viaAgent.timeouts === 0 &&
          trips.viaServer.notLocal + trips.viaAgent.notLocal === 0,
        detail: `timeouts ${trips.viaServer.timeouts + trips.viaAgent.timeouts}, not local after reset ${trips.viaServer.notLocal + trips.viaAgent.notLocal}`,
      },
      {
        what: 'aggregation: every outcome the agent acknowledged is on the server once (and every direct one)',
        ok:
          agg.edge.drained &&
          agg.edge.received === agg.edge.ok &&
          agg.direct.received === agg.direct.ok &&
          agg.edge.bad + agg.edge.errors + agg.direct.bad + agg.direct.errors === 0,
        detail: `through the agent ${agg.edge.received} of ${agg.edge.ok} (not 2xx ${agg.edge.bad}, errors ${agg.edge.errors}); direct ${agg.direct.received} of ${agg.direct.ok} (not 2xx ${agg.direct.bad}, errors ${agg.direct.errors})`,
      },
      {
        what: `aggregation: the batches the server received are the agent's (${agg.windows.batches} counted, batches_sent moved by ${agg.edge.batchesSent})`,
        ok: agg.windows.batches === agg.edge.batchesSent && agg.itemsTotal === agg.edge.received,
        detail: `${agg.itemsTotal} items in them, ${agg.edge.received} outcomes received`,
      },
    ];
    const notes = [
      `One circuitlog (log level warn, SQLite in a temp dir) and ${agentCount} agents (\`node dist/edge.js --server … --listen 127.0.0.1:0\`, defaults: flush_ms 10), all on ${LOOPBACK}; the 2 CPUs are shared with the load tool.`,
      `GET /allowed: ${opts.tool}, ${opts.connections} connections, ${Math.max(2, opts.rounds)} alternating rounds of ${durationSec} s after a warm-up (median); the server's CPU is /proc utime + stime of its process over each run.`,
      `Trips: \`${TRIP}\` has failure_threshold 1; one \`POST /circuits/${TRIP}/outcomes {"success":false}\` opens it; every agent is polled on one keep-alive connection back to back until its /allowed answers 503 (the agent forwards an open circuit to the server); latency from the server's answer to the POST (from its sending: p50 ${fmt(trips.viaServer.sendP50)} ms, p99 ${fmt(trips.viaServer.sendP99)} ms). Reset between trips, and each agent seen deciding the circuit locally again before the next.`,
      `Aggregation: ${reporters} child processes (bench/edge-reporter.mjs), each posting \`{"success":false}\` to \`POST /circuits/:name/outcomes\` on one keep-alive connection, one at a time, for ${durationSec} s (failure_threshold 10^9: every outcome a write); through a separate agent whose server is a pass-through proxy (bench/edge-batch-counter.mjs) that notes each \`POST /outcomes\` batch's arrival; then the same processes directly to the server; both after an unmeasured second each way (fresh processes compile first). Server CPU from the start of the load to the agent's last delivery.`,
      `Trip p99 goal ≤ ${GOAL_TRIP_P99_MS} ms: ${trips.viaServer.p99 <= GOAL_TRIP_P99_MS ? 'met' : 'NOT met'}; server CPU share < 5%: ${goals.cpu ? 'met' : 'NOT met'}; ≤ 1 batch per 10 ms on average: ${goals.batches ? 'met' : 'NOT met'}; server CPU per outcome lower through the agent: ${goals.aggCpu ? 'met' : 'NOT met'}. Agent req/s ${fmt(a.ratio)}x the server's.`,
    ];
    return {
      id: 'edge',
      title,
      durationSec,
      results: [load.scenario],
      notes,
      checks,
      goals: [
        {
          label: 'edge: server CPU while the agent answers GET /allowed, share of its own',
          value: `${fmt(load.serverCpuShare * 100, 2)}%`,
          goal: '< 5%',
          met: goals.cpu,
        },
        {
          label: 'edge: trip → every agent 503, p99',
          value: `${fmt(trips.viaServer.p99)} ms`,
          goal: `≤ ${GOAL_TRIP_P99_MS} ms`,
          met: goals.trip,
        },
        {
          label: 'edge: batches per 10 ms through one agent, average',
          value: fmt(agg.windows.avgPer10ms),
          goal: '≤ 1',
          met: goals.batches,
        },
        {
          label: 'edge: server CPU per outcome through the agent vs direct',
          value: `${fmt(agg.cpuRatio)}x`,
          goal: '< 1.00x',
          met: goals.aggCpu,
        },
      ],
      edgeMetrics: metrics,
      markdownExtra: edgeMarkdown(metrics),
    };
  } finally {
    await Promise.all(pools.map((p) => p.close().catch(() => undefined)));
    await ctx.stopEach(procs.reverse());
    ctx.removeTemp(tmp);
  }
}
