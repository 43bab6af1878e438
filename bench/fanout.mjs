// The readers part of the `scale` section (issue 20): how one circuitlog process fans a
// transition out to many readers.
//   - BENCH_SCALE_STREAMS (5,000) concurrent GET /events/stream readers, held by 4 worker threads
//     of this process: the time from sending a transition's request to each reader receiving its
//     event (p50/p99 over every reader and transition), and server RSS per stream; against 1
//     reader in the same run.
//   - BENCH_SCALE_CLIENTS (100) circuitlog/client instances in this process, each following the
//     server's stream into its local view: the time from the trip's request to each client's
//     `transition` event (emitted once its view holds the new state); against 1 client.
// Each round trips the circuit `fan` (failure_threshold 1: one failure opens it) and resets it:
// two transitions, the next sent only when every reader has the last. Loopback only, bounded.

import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { percentileSorted } from './lib.mjs';

const WORKERS = 4;
const ROUNDS = 20; // 40 transitions

const now = () => performance.timeOrigin + performance.now();

/** A worker thread holding `count` streams; it posts the arrival time of every event of every stream. */
const READER = `
import http from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
const { port, count } = workerData;
const now = () => performance.timeOrigin + performance.now();
const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
const arrivals = []; // per stream: event times in order
const requests = [];
let opened = 0;
let seen = 0; // events received over all streams
for (let i = 0; i < count; i++) {
  const times = [];
  arrivals.push(times);
  await new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/events/stream', agent }, (res) => {
      if (res.statusCode !== 200) return reject(new Error('stream: ' + res.statusCode));
      res.setEncoding('utf8');
      let first = true;
      res.on('data', (text) => {
        if (first) { first = false; opened++; resolve(); }
        const at = now();
        for (let k = text.indexOf('event: transition'); k >= 0; k = text.indexOf('event: transition', k + 1)) { times.push(at); seen++; }
        if (seen % count === 0) parentPort.postMessage({ seen: seen / count });
      });
    });
    req.on('error', reject);
    requests.push(req);
  });
}
parentPort.postMessage({ opened });
parentPort.on('message', (m) => {
  if (m !== 'report') return;
  parentPort.postMessage({ arrivals });
  for (const r of requests) r.destroy();
});
`;

export async function fanoutRun(ctx, tmp) {
  const streams = ctx.envInt('BENCH_SCALE_STREAMS', 5_000, 1, 20_000);
  const clients = ctx.envInt('BENCH_SCALE_CLIENTS', 100, 1, 1_000);
  const config = path.join(tmp, 'fanout.yaml');
  fs.writeFileSync(
    config,
    `events: { max_streams: ${streams + clients + 100} }\ncircuit_defaults: { failure_threshold: 1, timeout_seconds: 3600 }\n`,
  );
  const server = await ctx.startCircuitlog({
    name: 'circuitlog-fanout',
    db: path.join(tmp, 'fanout.db'),
    config,
    logLevel: 'warn',
  });
  const { createClient } = await import(pathToFileURL(path.join(ctx.repoRoot, 'dist', 'client', 'index.js')).href);
  try {
    await fetch(`${server.url}/circuits/fan/success`, { method: 'POST' }); // the circuit exists before the readers
    const one = await readersRun(server, 1);
    const many = await readersRun(server, streams);
    const oneClient = await clientsRun(createClient, server.url, 1);
    const manyClients = await clientsRun(createClient, server.url, clients);
    const out = { streams, clients, one, many, oneClient, manyClients };
    ctx.log(
      `scale :: fan-out: ${streams} streams p99 ${many.p99.toFixed(1)} ms (1 stream ${one.p99.toFixed(1)} ms), ${Math.round(many.bytesPerStream)} B RSS per stream; ${clients} clients p99 ${manyClients.p99.toFixed(1)} ms (1 client ${oneClient.p99.toFixed(1)} ms)`,
    );
    return out;
  } finally {
    await server.stop();
  }
}

const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
const trip = (url) => fetch(`${url}/circuits/fan/failure`, { method: 'POST' }).then((r) => r.arrayBuffer());
const reset = (url) => fetch(`${url}/circuits/fan/reset`, { method: 'POST' }).then((r) => r.arrayBuffer());

/** `count` raw SSE readers over worker threads; ROUNDS trips and resets, each waited for by every reader. */
async function readersRun(server, count) {
  await new Promise((r) => setTimeout(r, 500));
  const before = rss(server.pid);
  const port = new URL(server.url).port;
  const per = Array.from(
    { length: Math.min(WORKERS, count) },
    (_, i) => Math.floor(count / Math.min(WORKERS, count)) + (i < count % Math.min(WORKERS, count) ? 1 : 0),
  );
  const workers = per.map((n) => new Worker(READER, { eval: true, workerData: { port, count: n } }));
  const seen = workers.map(() => 0);
  let wake = () => {};
  const opened = workers.map(
    (w, i) =>
      new Promise((resolve, reject) => {
        w.on('error', reject);
        w.on('message', (m) => {
          if (m.opened !== undefined) resolve();
          if (m.seen !== undefined) {
            seen[i] = m.seen;
            wake();
          }
        });
      }),
  );
  await Promise.all(opened);
  await new Promise((r) => setTimeout(r, 1_000));
  const after = rss(server.pid);
  const sent = [];
  const allSeen = (k) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`fan-out: event ${k} did not reach every reader within 30 s`)),
        30_000,
      );
      wake = () => seen.every((s) => s >= k) && (clearTimeout(timer), resolve());
      wake();
    });
  for (let i = 0; i < ROUNDS; i++) {
    for (const step of [trip, reset]) {
      sent.push(now());
      await step(server.url);
      await allSeen(sent.length);
    }
  }
  const reports = await Promise.all(
    workers.map(
      (w) =>
        new Promise((resolve) => {
          w.on('message', (m) => m.arrivals && resolve(m.arrivals));
          w.postMessage('report');
        }),
    ),
  );
  await Promise.all(workers.map((w) => w.terminate()));
  const lat = reports
    .flat()
    .flatMap((times) => times.map((t, k) => t - sent[k]))
    .sort((a, b) => a - b);
  return {
    count,
    deliveries: lat.length,
    p50: percentileSorted(lat, 50),
    p99: percentileSorted(lat, 99),
    max: lat.at(-1),
    bytesPerStream: (after - before) / count,
  };
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
