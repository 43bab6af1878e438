// The readers part of the `scale` section (issue 20), and the `fanout` section on its own: how one
// circuitlog process fans a transition out to many readers.
//   - BENCH_SCALE_STREAMS (5,000) concurrent GET /events/stream readers, held by 4 child processes
//     (bench/fanout-reader.mjs: raw sockets, a parser that only counts `event: transition`), so
//     that no reader shares the server's event loop or the bench's: the time from the transition's
//     acknowledgement (its POST answered) to each reader receiving its event (p50/p99 over every
//     reader and transition; also from the request's sending, as the figure before issue 20 was
//     taken), and the server's RSS and V8 heap per stream; against 1 reader in the same run.
//     With BENCH_BASELINE_DIST (another build's dist/), as many readers follow a server of that build
//     at the same time and the rounds alternate between the two servers (same machine, same run).
//   - BENCH_SCALE_CLIENTS (100) circuitlog/client instances in this process, each following the
//     server's stream into its local view: the time from the trip's request to each client's
//     `transition` event (emitted once its view holds the new state); against 1 client.
// Each round trips the circuit `fan` (failure_threshold 1: one failure opens it) and resets it:
// two transitions, the next sent only when every reader has the last. Loopback only, bounded.

import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { percentileSorted } from './lib.mjs';

const READER_PROCESSES = 4;
const ROUNDS = 20; // 40 transitions

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The `fanout` section of `npm run bench`: the readers and clients of the scale section, alone. */
export async function fanoutSection(ctx) {
  const tmp = ctx.tempDir('circuitlog-bench-fanout-');
  try {
    const fanout = await fanoutRun(ctx, tmp);
    return {
      id: 'fanout',
      title:
        'Fan-out: one transition to many /events/stream readers and circuitlog/client instances (one server process)',
      durationSec: 0,
      results: [],
      fanout,
      markdownExtra: fanoutMarkdown(fanout),
      notes: [
        `${READER_PROCESSES} reader processes on raw sockets; ${ROUNDS * 2} transitions per run, each sent once every reader has the last; latency from the POST's answer to each reader's arrival.`,
      ],
      checks: [],
    };
  } finally {
    ctx.removeTemp(tmp);
  }
}

export async function fanoutRun(ctx, tmp) {
  const streams = ctx.envInt('BENCH_SCALE_STREAMS', 5_000, 1, 20_000);
  const clients = ctx.envInt('BENCH_SCALE_CLIENTS', 100, 1, 1_000);
  const config = path.join(tmp, 'fanout.yaml');
  fs.writeFileSync(
    config,
    `events: { max_streams: ${streams + clients + 100} }\ncircuit_defaults: { failure_threshold: 1, timeout_seconds: 3600 }\n`,
  );
  const start = (name, main) =>
    ctx.startCircuitlog({ name, db: path.join(tmp, `${name}.db`), config, logLevel: 'warn', main });
  const { createClient } = await import(pathToFileURL(path.join(ctx.repoRoot, 'dist', 'client', 'index.js')).href);
  const out = { streams, clients };
  const baseDist = process.env.BENCH_BASELINE_DIST;
  const server = await start('circuitlog-fanout');
  const base = baseDist ? await start('circuitlog-fanout-baseline', path.resolve(baseDist, 'main.js')) : null;
  try {
    for (const s of [server, base]) if (s) await fetch(`${s.url}/circuits/fan/success`, { method: 'POST' }); // the circuit exists before the readers
    [out.one] = await readersRun([server], 1);
    [out.many, out.baseline] = await readersRun(base ? [server, base] : [server], streams);
    out.oneClient = await clientsRun(createClient, server.url, 1);
    out.manyClients = await clientsRun(createClient, server.url, clients);
  } finally {
    await server.stop();
    await base?.stop();
  }
  const { many, one, manyClients, oneClient, baseline } = out;
  ctx.log(
    `fan-out: ${streams} streams p99 ${many.p99.toFixed(1)} ms from ack, ${many.sendP99.toFixed(1)} ms from send (1 stream ${one.p99.toFixed(1)} ms${baseline ? `; baseline build ${baseline.p99.toFixed(1)} ms` : ''}), ${Math.round(many.bytesPerStream)} B RSS and ${Math.round(many.heapPerStream)} B heap per stream; ${clients} clients p99 ${manyClients.p99.toFixed(1)} ms (1 client ${oneClient.p99.toFixed(1)} ms)`,
  );
  return out;
}

const f0 = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–');

/** The readers' table (the scale section prints the same). */
export function fanoutMarkdown({ one, many, oneClient, manyClients, baseline }) {
  const row = (label, r, ratio) =>
    `| ${label} | ${f0(r.deliveries)} | ${f2(r.p50)} | ${f2(r.p99)} | ${f2(r.max)} | ${r.sendP99 === undefined ? '–' : f2(r.sendP99)} | ${ratio} | ${r.bytesPerStream === undefined ? '–' : `${f0(r.bytesPerStream)} B`} | ${r.heapPerStream === undefined ? '–' : `${f0(r.heapPerStream)} B`} | ${r.lagMaxMs === undefined ? '–' : f2(r.lagMaxMs)} |`;
  return [
    '| readers (SQLite, one server process) | deliveries | p50 ms | p99 ms | max ms | p99 ms from send | p99 ratio to 1 | server RSS per stream | server heap per stream | server event-loop delay max ms |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    row('1 GET /events/stream', { ...one, bytesPerStream: undefined, heapPerStream: undefined }, '1.00x'),
    row(`${f0(many.count)} GET /events/stream`, many, `${f2(many.p99 / one.p99)}x`),
    ...(baseline
      ? [
          row(
            `${f0(baseline.count)} GET /events/stream, BENCH_BASELINE_DIST build`,
            baseline,
            `${f2(baseline.p99 / one.p99)}x`,
          ),
        ]
      : []),
    row('1 circuitlog/client (trip → local view)', oneClient, '1.00x'),
    row(`${f0(manyClients.count)} circuitlog/client`, manyClients, `${f2(manyClients.p99 / oneClient.p99)}x`),
    '',
    "Stream latencies are from the transition's acknowledgement (its POST answered) to each reader's arrival; client latencies from the trip's request to each local view.",
    '',
    `- ${f0(many.count)} streams: a transition reaches all within p99 ${f2(many.p99)} ms (goal ≤ 250 ms): ${many.p99 <= 250 ? 'met' : 'NOT met'}`,
    `- ${f0(manyClients.count)} clients: a trip reaches every local view within p99 ${f2(manyClients.p99)} ms (goal ≤ 250 ms): ${manyClients.p99 <= 250 ? 'met' : 'NOT met'}`,
  ].join('\n');
}

const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
/**
 * The server's V8 heap in use and its event-loop delay since the last scrape (prom-client's
 * default gauges, which reset the delay histogram on each scrape); NaN with metrics off.
 */
async function serverGauges(url) {
  const text = await fetch(`${url}/metrics`).then((r) => (r.ok ? r.text() : ''));
  const gauge = (name) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    heap: gauge('nodejs_heap_size_used_bytes'),
    lagMaxMs: gauge('nodejs_eventloop_lag_max_seconds') * 1000,
    lagP99Ms: gauge('nodejs_eventloop_lag_p99_seconds') * 1000,
  };
}
const trip = (url) => fetch(`${url}/circuits/fan/failure`, { method: 'POST' }).then((r) => r.arrayBuffer());
const reset = (url) => fetch(`${url}/circuits/fan/reset`, { method: 'POST' }).then((r) => r.arrayBuffer());

/** Split `count` readers over the reader processes. */
const shares = (count) => {
  const n = Math.min(READER_PROCESSES, count);
  return Array.from({ length: n }, (_, i) => Math.floor(count / n) + (i < count % n ? 1 : 0));
};

/** Start the reader processes; resolves once every stream is open. */
async function openReaders(port, count) {
  const children = shares(count).map((n) =>
    fork(path.join(import.meta.dirname, 'fanout-reader.mjs'), [String(port), String(n)], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    }),
  );
  const seen = children.map(() => 0);
  const readers = { children, seen, wake: () => {} };
  const opened = Promise.all(
    children.map(
      (child, i) =>
        new Promise((resolve, reject) => {
          child.on('error', reject);
          child.on('exit', (code) => code !== 0 && reject(new Error(`fan-out reader exited ${code}`)));
          child.on('message', (m) => {
            if (m.opened !== undefined) resolve();
            if (m.seen !== undefined) {
              seen[i] = m.seen;
              readers.wake();
            }
          });
        }),
    ),
  );
  try {
    await opened;
  } catch (error) {
    for (const child of children) child.kill();
    throw error;
  }
  return readers;
}

/** Every stream's arrival times, from every reader process; then they exit. */
const collect = (children) =>
  Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          child.on('message', (m) => m.arrivals && resolve(m.arrivals));
          child.send('report');
        }),
    ),
  ).then((r) => r.flat());

/** Resolves once each of `readers`' processes has seen `k` events on every stream. */
const allSeen = (readers, k) =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`fan-out: event ${k} did not reach every reader within 30 s`)),
      30_000,
    );
    readers.wake = () => {
      if (!readers.seen.every((s) => s >= k)) return;
      clearTimeout(timer);
      resolve();
    };
    readers.wake();
  });

/** `count` readers of one server, open, with its RSS and heap before and after they opened. */
async function openSide(server, count) {
  const before = { rss: rss(server.pid), heap: (await serverGauges(server.url)).heap };
  const side = { server, count, sent: [], acked: [], before };
  side.readers = await openReaders(new URL(server.url).port, count);
  await sleep(1_000);
  side.after = { rss: rss(server.pid), heap: (await serverGauges(server.url)).heap };
  return side;
}

/** One server's figures once its rounds are done. */
async function sideResult(side) {
  const loop = await serverGauges(side.server.url); // the event loop's delay over the rounds
  const arrivals = await collect(side.readers.children);
  const sorted = (from) => arrivals.flatMap((times) => times.map((t, k) => t - from[k])).sort((a, b) => a - b);
  const lat = sorted(side.acked);
  const fromSend = sorted(side.sent);
  const { before, after, count } = side;
  return {
    count,
    deliveries: lat.length,
    p50: percentileSorted(lat, 50),
    p99: percentileSorted(lat, 99),
    max: lat.at(-1),
    sendP50: percentileSorted(fromSend, 50),
    sendP99: percentileSorted(fromSend, 99),
    bytesPerStream: (after.rss - before.rss) / count,
    heapPerStream: (after.heap - before.heap) / count,
    lagMaxMs: loop.lagMaxMs,
    lagP99Ms: loop.lagP99Ms,
  };
}

/**
 * `count` raw SSE readers of each server, in child processes; ROUNDS trips and resets on each,
 * each transition waited for by every reader of its server. With two servers (this build and
 * the baseline) the rounds alternate between them, in alternating order, so both see the same
 * machine; the idle one's readers only wait.
 */
async function readersRun(servers, count) {
  await sleep(500);
  const sides = [];
  try {
    for (const server of servers) sides.push(await openSide(server, count));
    for (const side of sides) await serverGauges(side.server.url); // the delay histograms start afresh
    for (let i = 0; i < ROUNDS; i++) {
      for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
        for (const step of [trip, reset]) {
          side.sent.push(now());
          await step(side.server.url);
          side.acked.push(now());
          await allSeen(side.readers, side.sent.length);
        }
      }
    }
    const results = [];
    for (const side of sides) results.push(await sideResult(side));
    return results;
  } finally {
    for (const side of sides) for (const child of side.readers.children) child.kill();
  }
}

/** `count` clients following the server; ROUNDS trips, each timed to every client's `transition` event. */
async function clientsRun(createClient, url, count) {
  const made = [];
  try {
    for (let i = 0; i < count; i++) made.push(createClient({ url }));
    await Promise.all(made.map((c) => c.ready()));
    await Promise.all(made.map((c) => c.call('fan', async () => {}))); // the circuit is in every local view
    const lat = [];
    for (let i = 0; i < ROUNDS; i++) {
      for (const [step, to] of [
        [trip, 'open'],
        [reset, 'closed'],
      ]) {
        const arrived = made.map(
          (c) =>
            new Promise((resolve) => {
              const off = c.on('transition', (e) => {
                if (e.circuit !== 'fan' || e.to !== to) return;
                const at = now();
                off();
                if (c.state('fan') !== to)
                  throw new Error(`fan-out: a client's view shows ${c.state('fan')} after the ${to} event`);
                resolve(at);
              });
            }),
        );
        const t0 = now();
        await step(url);
        const times = await Promise.race([
          Promise.all(arrived),
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error('fan-out: a client missed a transition for 30 s')), 30_000),
          ),
        ]);
        if (to === 'open') lat.push(...times.map((t) => t - t0));
      }
    }
    lat.sort((a, b) => a - b);
    return {
      count,
      deliveries: lat.length,
      p50: percentileSorted(lat, 50),
      p99: percentileSorted(lat, 99),
      max: lat.at(-1),
    };
  } finally {
    await Promise.all(made.map((c) => c.close()));
  }
}
