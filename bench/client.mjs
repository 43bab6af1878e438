// `npm run bench` section "client" (BENCH_ONLY=client): the circuitlog/client library against
// one real circuitlog on loopback, in the same run:
//   - call() on a closed circuit with an async no-op vs sequential GET /allowed round trips from
//     one client (goal: >= 20x), and the time call() adds to the no-op per call (p50, goal <= 5 us);
//   - 4 clients, 1,000 calls/s each, half failing: the server's counts equal the calls made;
//   - the stream's lag: from client A's call that trips a circuit to client B's transition event;
//   - the change stream in a tight loop: 10,000 changes (BENCH_STREAM_CHANGES) made back to back
//     over HTTP, each one's lag from its request to its event on a raw GET /events/stream (issue 27).
// Results land in the same table and JSON as the other sections (see bench/README.md).

import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { envInt, fmt, percentileSorted } from './lib.mjs';

const GOAL_RATIO = 20;
const GOAL_ADDED_P50_US = 5;
const FLEET = 4;
const FLEET_RATE = 1_000; // calls per second per client
// 2 s: 8,000 calls, which a count window of 10,000 (the fallback when /metrics is off) holds whole.
const FLEET_MS = 2_000;
const LAG_SAMPLES = 30;
const STREAM_CHANGES = envInt('BENCH_STREAM_CHANGES', 10_000);
const ROUNDS = 3;

const noop = async () => undefined;
const boom = async () => {
  throw new Error('boom');
};
const sorted = (xs) => [...xs].sort((a, b) => a - b);

/** A client whose event stream is open; a server without /events/stream fails the section, not hangs it. */
async function connected(createClient, url) {
  const client = createClient({ url });
  let timer;
  const expired = new Promise(
    (_, reject) =>
      (timer = setTimeout(() => reject(new Error(`client: no event stream from ${url} within 10 s`)), 10_000)),
  );
  await Promise.race([client.ready(), expired]).finally(() => clearTimeout(timer));
  return client;
}

/** Sequential `GET /allowed` round trips from one keep-alive connection, for `ms`. */
async function allowedRoundTrips(url, ms) {
  const pool = new Pool(url, { connections: 1 });
  const path_ = '/circuits/bench%2Fclosed/allowed';
  const samples = [];
  let errors = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const t = performance.now();
    const res = await pool.request({ method: 'GET', path: path_ });
    await res.body.dump();
    if (res.statusCode !== 200) errors++;
    samples.push(performance.now() - t);
  }
  await pool.close();
  return { count: samples.length, errors, rps: samples.length / (ms / 1000), latencies: sorted(samples) };
}

/** Sequential `client.call()` on a closed circuit for `ms`. */
async function sequentialCalls(client, ms) {
  let count = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) await client.call('bench/closed', noop);
    count += 1000;
  }
  return { count, rps: count / (ms / 1000) };
}

/** Per-call time of `await client.call(noop)` and of `await noop()`, interleaved, in microseconds. */
async function addedTime(client, samples) {
  const direct = new Float64Array(samples);
  const viaClient = new Float64Array(samples);
  for (let i = 0; i < samples; i++) {
    let t = performance.now();
    await noop();
    direct[i] = (performance.now() - t) * 1000;
    t = performance.now();
    await client.call('bench/closed', noop);
    viaClient[i] = (performance.now() - t) * 1000;
  }
  const d = sorted(direct);
  const c = sorted(viaClient);
  return {
    directP50: percentileSorted(d, 50),
    clientP50: percentileSorted(c, 50),
    clientP99: percentileSorted(c, 99),
    addedP50: percentileSorted(c, 50) - percentileSorted(d, 50),
  };
}

/** FLEET clients, FLEET_RATE calls/s each for `ms`, every other call failing. */
async function fleetRun(createClient, url, ms) {
  const clients = await Promise.all(Array.from({ length: FLEET }, () => connected(createClient, url)));
  const made = { success: 0, failure: 0 };
  const tickMs = 10;
  const perTick = (FLEET_RATE * tickMs) / 1000;
  const made_ = new Map(clients.map((c) => [c, 0]));
  const pending = [];
  const started = performance.now();
  await new Promise((resolve) => {
    const timer = setInterval(() => {
      const due = Math.min(ms, performance.now() - started);
      const target = Math.floor((due / tickMs) * perTick);
      for (const client of clients) {
        while (made_.get(client) < target) {
          made_.set(client, made_.get(client) + 1);
          const fails = made_.get(client) % 2 === 0;
          made[fails ? 'failure' : 'success']++;
          pending.push(client.call('bench/mixed', fails ? boom : noop).catch(() => undefined));
        }
      }
      if (due >= ms) {
        clearInterval(timer);
        resolve();
      }
    }, tickMs);
  });
  await Promise.all(pending);
  await Promise.all(clients.map((c) => c.close()));
  return { made, seconds: ms / 1000, stats: clients.map((c) => c.stats()) };
}

/** The server's outcome counts for a circuit: /metrics when it serves them, else the window figures. */
async function serverCounts(url, name) {
  const metrics = await fetch(`${url}/metrics`).then(
    (r) => (r.ok ? r.text() : ''),
    () => '',
  );
  const read = (outcome) => {
    const line = metrics
      .split('\n')
      .find(
        (l) =>
          l.startsWith(`circuitlog_outcomes_total{`) &&
          l.includes(`circuit="${name}"`) &&
          l.includes(`kind="${outcome}"`),
      );
    return line === undefined ? null : Number(line.trim().split(/\s+/).pop());
  };
  if (read('success') !== null || read('failure') !== null)
    return {
      success: read('success') ?? 0,
      failure: read('failure') ?? 0,
      source: '/metrics circuitlog_outcomes_total',
    };
  const circuit = await fetch(`${url}/circuits/${encodeURIComponent(name)}`).then((r) => r.json());
  const w = circuit.window_stats;
  if (w && typeof w.calls === 'number')
    return { success: w.calls - w.failures, failure: w.failures, source: 'window_stats of a count window' };
  return null;
}

/** From A's call that trips `bench/lag` (threshold 1) to B's `transition` event, in ms. */
async function streamLag(createClient, url) {
  const [a, b] = await Promise.all([connected(createClient, url), connected(createClient, url)]);
  const lags = [];
  let waiter = null;
  b.on('transition', (e) => e.circuit === 'bench/lag' && waiter?.(e));
  const next = (to) => new Promise((resolve) => (waiter = (e) => e.to === to && resolve(performance.now())));
  await b.call('bench/lag', noop);
  for (let i = 0; i < LAG_SAMPLES; i++) {
    const opened = next('open');
    const t0 = performance.now();
    await a.call('bench/lag', boom).catch(() => undefined);
    lags.push((await opened) - t0);
    const closed = next('closed');
    await fetch(`${url}/circuits/bench%2Flag/reset`, { method: 'POST' });
    await closed;
  }
  await Promise.all([a.close(), b.close()]);
  return sorted(lags);
}

/**
 * The change stream in a tight loop: `changes` transitions of `bench/stream` (threshold 1), a
 * failure outcome that opens it then a reset that closes it, each request sent as soon as the
 * previous event arrived; each lag from its request's start to its event on one raw
 * `GET /events/stream` reader (the client's own parser), in ms, sorted.
 */
export async function changeStreamLag(repoRoot, url, changes) {
  const { SseParser } = await import(pathToFileURL(path.join(repoRoot, 'dist', 'client', 'sse.js')).href);
  const pool = new Pool(url, { connections: 1 });
  const stream = new AbortController();
  const res = await fetch(`${url}/events/stream`, { signal: stream.signal, headers: { accept: 'text/event-stream' } });
  let waiter = null;
  const parser = new SseParser((m) => {
    if (m.event !== 'transition' || waiter === null) return;
    const t = JSON.parse(m.data);
    if (t.circuit === 'bench/stream' && t.to === waiter.to) waiter.resolve(performance.now());
  });
  const reading = (async () => {
    try {
      for await (const chunk of res.body) parser.push(chunk);
    } catch (error) {
      if (error.name !== 'AbortError') throw error;
    }
  })();
  const next = (to) => new Promise((resolve) => (waiter = { to, resolve }));
  const request = async (method, tail, body) => {
    const answer = await pool.request({
      method,
      path: `/circuits/bench%2Fstream${tail}`,
      headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    await answer.body.dump();
    if (answer.statusCode >= 300) throw new Error(`change stream: ${method} ${tail} answered ${answer.statusCode}`);
  };
  await request('POST', '/reset').catch(() => undefined); // creates it
  await request('POST', '/outcomes', { success: true });
  const lags = [];
  for (let i = 0; i < changes; i++) {
    const to = i % 2 === 0 ? 'open' : 'closed';
    const arrived = next(to);
    const t0 = performance.now();
    await (to === 'open' ? request('POST', '/outcomes', { success: false }) : request('POST', '/reset'));
    lags.push((await arrived) - t0);
  }
  stream.abort();
  await reading;
  await pool.close();
  return sorted(lags);
}

function target(label, rps, p50, p99, extra = {}) {
  return {
    label,
    rps,
    p50,
    p99,
    ratio: 1,
    goal: null,
    met: null,
    valid: true,
    isBaseline: false,
    requests: 0,
    non2xx: 0,
    errors: 0,
    cpuUsPerReq: null,
    runs: [{ rps }],
    ...extra,
  };
}

export async function clientSection({ startCircuitlog, tempDir, removeTemp, stopEach, log, repoRoot, durationSec }) {
  const { createClient } = await import(pathToFileURL(path.join(repoRoot, 'dist', 'client', 'index.js')).href);
  const tmp = tempDir('circuitlog-bench-client-');
  const procs = [];
  const fs = await import('node:fs');
  try {
    const config = path.join(tmp, 'circuitlog.yaml');
    // Half the fleet's calls fail: circuits must not trip for the counts to be comparable.
    fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 1000000000\n');
    const server = await startCircuitlog({ name: 'circuitlog-client', db: path.join(tmp, 'client.db'), config });
    procs.push(server);
    const ms = durationSec * 1000;

    log('client: sequential GET /allowed and call() on a closed circuit, interleaved');
    const client = await connected(createClient, server.url);
    await allowedRoundTrips(server.url, 500); // warm-up, both
    await sequentialCalls(client, 500);
    // Three interleaved rounds of each, medians: this shared machine drifts during a run.
    const rounds = { allowed: [], calls: [] };
    for (let r = 0; r < ROUNDS; r++) {
      rounds.allowed.push(await allowedRoundTrips(server.url, ms / ROUNDS));
      rounds.calls.push(await sequentialCalls(client, ms / ROUNDS));
    }
    const byRps = (xs) => [...xs].sort((a, b) => a.rps - b.rps)[ROUNDS >> 1];
    const allowed = byRps(rounds.allowed);
    const calls = byRps(rounds.calls);
    const added = await addedTime(client, 100_000);
    await client.close();
    const ratio = calls.rps / allowed.rps;

    log('client: 4 clients x 1,000 calls/s, half failing');
    await fetch(`${server.url}/circuits/bench%2Fmixed`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({
        window: { type: 'count', size: 10_000, failure_rate_threshold: 100, minimum_calls: 10_000 },
      }),
    }).catch(() => undefined);
    const fleet = await fleetRun(createClient, server.url, FLEET_MS);
    const counts = await serverCounts(server.url, 'bench/mixed');

    log('client: stream lag');
    fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 1\n  timeout_seconds: 3600\n');
    const lagServer = await startCircuitlog({ name: 'circuitlog-lag', db: path.join(tmp, 'lag.db'), config });
    procs.push(lagServer);
    const lags = await streamLag(createClient, lagServer.url);
    log(`client: change stream lag over ${STREAM_CHANGES} changes in a tight loop`);
    const changeLags = await changeStreamLag(repoRoot, lagServer.url, STREAM_CHANGES);

    const baseline = target(
      'sequential GET /allowed round trips (one connection)',
      allowed.rps,
      percentileSorted(allowed.latencies, 50),
      percentileSorted(allowed.latencies, 99),
      {
        isBaseline: true,
        valid: rounds.allowed.every((r) => r.errors === 0),
        requests: allowed.count,
        runs: rounds.allowed.map((r) => ({ rps: r.rps })),
        non2xx: allowed.errors,
      },
    );
    const subject = target(
      'client.call() on a closed circuit, async no-op',
      calls.rps,
      added.clientP50 / 1000,
      added.clientP99 / 1000,
      {
        ratio,
        goal: GOAL_RATIO,
        met: ratio >= GOAL_RATIO,
        requests: calls.count,
        runs: rounds.calls.map((r) => ({ rps: r.rps })),
      },
    );
    const made = fleet.made.success + fleet.made.failure;
    const exact = counts !== null && counts.success === fleet.made.success && counts.failure === fleet.made.failure;
    return {
      id: 'client',
      title: 'Client library: circuitlog/client vs GET /allowed round trips (one process, sequential)',
      durationSec,
      results: [{ id: 'client-call', title: 'call() vs GET /allowed', targets: [baseline, subject] }],
      notes: [
        `call() adds ${fmt(added.addedP50, 2)} µs p50 per call to an async no-op (${fmt(added.clientP50, 2)} µs via call() vs ${fmt(added.directP50, 2)} µs direct; 100,000 interleaved samples): goal ≤ ${GOAL_ADDED_P50_US} µs ${added.addedP50 <= GOAL_ADDED_P50_US ? 'met' : 'NOT met'}.`,
        `${FLEET} clients × ${FLEET_RATE} calls/s for ${fleet.seconds} s, every other call failing: ${made} calls made (${fleet.made.success} ok, ${fleet.made.failure} failed); server counts ${counts === null ? 'unavailable' : `${counts.success} ok, ${counts.failure} failed (${counts.source})`}; dropped ${fleet.stats.reduce((n, s) => n + s.outcomesDropped, 0)}.`,
        `Stream lag, A's call that trips a circuit → B's transition event (${LAG_SAMPLES} samples, includes the ${5} ms batch delay): p50 ${fmt(percentileSorted(lags, 50))} ms, p99 ${fmt(percentileSorted(lags, 99))} ms, max ${fmt(lags.at(-1))} ms.`,
        `Change stream in a tight loop, ${changeLags.length} changes (open by a failure outcome, close by a reset, back to back) → a raw GET /events/stream reader: p50 ${fmt(percentileSorted(changeLags, 50))} ms, p99 ${fmt(percentileSorted(changeLags, 99))} ms, max ${fmt(changeLags.at(-1))} ms.`,
      ],
      checks: [
        {
          what: 'server outcome counts equal the calls the 4 clients made',
          ok: exact,
          detail: counts === null ? 'server serves no outcome counts' : `${counts.success + counts.failure} of ${made}`,
        },
      ],
      clientMetrics: {
        addedTimeUs: added,
        allowedRps: allowed.rps,
        callRps: calls.rps,
        ratio,
        fleet: { made: fleet.made, counts },
        streamLagMs: { p50: percentileSorted(lags, 50), p99: percentileSorted(lags, 99), max: lags.at(-1) },
        changeStreamLagMs: {
          changes: changeLags.length,
          p50: percentileSorted(changeLags, 50),
          p99: percentileSorted(changeLags, 99),
          max: changeLags.at(-1),
        },
      },
    };
  } finally {
    await stopEach(procs.reverse());
    removeTemp(tmp);
  }
}
