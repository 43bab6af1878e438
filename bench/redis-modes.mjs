// The `redis-modes` section of `npm run bench` (issue 19): the three ways to run Redis, in the same run.
//
//   GET /allowed (closed): Sentinel, Cluster   vs plain Redis                  goal ≥ 0.9x (answered from the cache)
//   failure outcomes: Cluster                  vs plain Redis                  goal ≥ 0.8x
//   failure outcomes: replicas_ack 1           vs 0 (a primary with a replica)  (report: one WAIT per write)
//   batched POST /outcomes, 3 hosts: a Cluster of 3 primaries vs 1 primary      (report the factor; bench/redis-scaling.mjs)
//     uncapped (every process may use any core: the hosts are the limit here), then capped (each
//     primary in a CPU cgroup of its own at 0.05 of a core: the primaries are the limit, as in production)
//
// BENCH_REDIS_MODES=ratios (the first three) or =scaling (the last) runs one part; default both.
//
// Every redis-server is the test's own: loopback, random ports, temp dirs, no persistence (the
// comparison is of the modes, not of the disk). Bounded durations; all processes share this
// machine's CPUs, which bounds what more primaries can add.

import { execFile, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import os from 'node:os';
import { missingPrograms, startProcess } from './lib.mjs';
import { HOSTS, scalingPart } from './redis-scaling.mjs';

const exec = promisify(execFile);
const JSON_HEADERS = { 'content-type': 'application/json' };

/** `ctx`: helpers of run.mjs (as for the redis section). */
export async function redisModesSection(ctx) {
  // BENCH_REDIS_MODES=ratios or =scaling runs one part (default both).
  const parts = new Set((process.env.BENCH_REDIS_MODES ?? 'ratios,scaling').split(','));
  const durationSec = ctx.durationFor('redis-modes');
  const skipped = missingPrograms(['redis-server', 'redis-cli'], {
    id: 'redis-modes',
    title: 'Redis modes',
    durationSec,
  });
  if (skipped) return skipped;
  const tmp = ctx.tempDir('circuitlog-bench-modes-');
  const procs = [];
  const servers = [];
  const node = async (args = []) => {
    const s = await redisServer(tmp, args);
    servers.push(s);
    return s;
  };
  try {
    const plain = await node();
    const primary = await node();
    await node(['--replicaof', '127.0.0.1', String(primary.port)]);
    await until(async () => (await cli(primary.port, 'INFO', 'replication')).includes('connected_slaves:1'));
    const sentinel = await startSentinel(tmp, primary.port, servers);
    const cluster3 = await cluster(node, 3);
    const cluster1 = await cluster(node, 1);
    const env = (extra) => ({
      HOST: '127.0.0.1',
      CIRCUITLOG_LOG_LEVEL: 'warn',
      CIRCUITLOG_CONFIG: '',
      CIRCUITLOG_TOKEN: '',
      ...extra,
    });
    const start = async (name, extra, nodeArgs = [], dist = ctx.dist) => {
      const p = await startProcess({
        name,
        args: [...nodeArgs, dist],
        cwd: ctx.repoRoot,
        port: 'auto',
        readyPath: '/health',
        timeoutMs: 30_000,
        env: env(extra),
      });
      procs.push(p);
      return p;
    };
    const ackConfig = path.join(tmp, 'ack1.yaml');
    fs.writeFileSync(ackConfig, 'store:\n  redis: { replicas_ack: 1, replicas_ack_timeout_ms: 1000 }\n');
    const hPlain = await start('circuitlog-plain', { CIRCUITLOG_STORE: plain.url });
    const hSentinel = await start('circuitlog-sentinel', {
      CIRCUITLOG_STORE: `redis+sentinel://127.0.0.1:${sentinel.port}/bench`,
    });
    const hCluster = await start('circuitlog-cluster', { CIRCUITLOG_STORE: cluster3.url });
    const hAck0 = await start('circuitlog-ack0', { CIRCUITLOG_STORE: `redis://127.0.0.1:${primary.port}/1` });
    const hAck1 = await start('circuitlog-ack1', {
      CIRCUITLOG_STORE: `redis://127.0.0.1:${primary.port}/2`,
      CIRCUITLOG_CONFIG: ackConfig,
    });
    for (const h of [hPlain, hSentinel, hCluster, hAck0, hAck1]) await ctx.setupBenchCircuits(h.url);
    const allowed = (id, label, h, goal = null) => ({
      id,
      label,
      url: `${h.url}/circuits/bench-ok/allowed`,
      goal,
      pid: h.pid,
    });
    const fail = (id, label, h, goal = null) => ({
      id,
      label,
      url: `${h.url}/circuits/bench-fail/outcomes`,
      method: 'POST',
      headers: JSON_HEADERS,
      body: '{"success":false}',
      goal,
      pid: h.pid,
    });
    const scenarios = [
      {
        id: 'modes-allowed',
        title: 'redis-modes: GET /allowed (closed) on Sentinel and Cluster vs plain Redis',
        baseline: 'plain-allowed',
        targets: [
          allowed('plain-allowed', 'plain Redis: GET /circuits/bench-ok/allowed', hPlain),
          allowed('sentinel-allowed', 'Sentinel: GET /circuits/bench-ok/allowed', hSentinel, 0.9),
          allowed('cluster-allowed', 'Cluster (3 primaries): GET /circuits/bench-ok/allowed', hCluster, 0.9),
        ],
      },
      {
        id: 'modes-fail',
        title: 'redis-modes: failure outcomes on Cluster vs plain Redis',
        baseline: 'plain-fail',
        targets: [
          fail('plain-fail', 'plain Redis: POST /circuits/bench-fail/outcomes {"success":false}', hPlain),
          fail('cluster-fail', 'Cluster (3 primaries): the same', hCluster, 0.8),
        ],
      },
      {
        id: 'modes-ack',
        title: 'redis-modes: failure outcomes with replicas_ack 1 vs 0 (a primary with one replica)',
        baseline: 'ack0-fail',
        targets: [
          fail('ack0-fail', 'replicas_ack 0: POST /circuits/bench-fail/outcomes', hAck0),
          fail('ack1-fail', 'replicas_ack 1: the same (WAIT 1 after each write)', hAck1),
        ],
      },
    ];
    const results = parts.has('ratios') ? await ctx.runSuite(scenarios, ctx.suiteOptions(durationSec)) : [];
    // Scaling: HOSTS circuitlog processes on each cluster, batched outcomes over many circuits
    // (every shard), 1, 3, 1, 3; uncapped, then each primary capped (bench/redis-scaling.mjs).
    for (const p of [hPlain, hSentinel, hCluster, hAck0, hAck1]) await ctx.stopEach([p]);
    procs.length = 0;
    const scaling = parts.has('scaling')
      ? await scalingPart(ctx, start, { one: cluster1, three: cluster3 }, durationSec)
      : { notes: [], checks: [] };
    return {
      id: 'redis-modes',
      title: 'Redis modes: plain, Sentinel, Cluster; replicas_ack; primaries',
      durationSec,
      results,
      notes: [
        ...scaling.notes,
        `All ${HOSTS} hosts, the primaries and the load generator share this machine's ${os.availableParallelism()} CPUs ("cores": CPU seconds per second of each role, from /proc).`,
        `redis-server ${
          spawnSync('redis-server', ['--version'])
            .stdout.toString()
            .match(/v=(\S+)/)?.[1] ?? '?'
        } without persistence; Sentinel: 1 sentinel (quorum 1) over a primary with one replica; Cluster: 3 primaries, no replicas; replicas_ack on the Sentinel's primary (its replica confirms).`,
      ],
      checks: scaling.checks,
    };
  } finally {
    await ctx.stopEach(procs);
    for (const s of servers) s.stop();
    ctx.removeTemp(tmp);
  }
}

const cli = async (port, ...args) =>
  (await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args])).stdout.trim();

async function until(check, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error('redis-modes: a Redis setup did not come up');
    await new Promise((r) => setTimeout(r, 100));
  }
}

const isFree = (port) =>
  new Promise((resolve) => {
    const s = net
      .createServer()
      .once('error', () => resolve(false))
      .listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

async function freePort() {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    if ((await isFree(port)) && (await isFree(port + 10_000))) return port; // a cluster bus port too
  }
}

async function redisServer(tmp, args) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(tmp, 'r-'));
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', ...args],
    { stdio: 'ignore' },
  );
  await until(async () => (await cli(port, 'PING')) === 'PONG');
  return { port, pid: child.pid, url: `redis://127.0.0.1:${port}/0`, stop: () => child.kill('SIGKILL') };
}

async function startSentinel(tmp, primaryPort, servers) {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(tmp, 's-'));
  const conf = path.join(dir, 'sentinel.conf');
  fs.writeFileSync(
    conf,
    `port ${port}\nbind 127.0.0.1\ndir ${dir}\nsentinel monitor bench 127.0.0.1 ${primaryPort} 1\n`,
  );
  const child = spawn('redis-server', [conf, '--sentinel'], { stdio: 'ignore' });
  servers.push({ stop: () => child.kill('SIGKILL') });
  await until(async () =>
    (await cli(port, 'SENTINEL', 'get-master-addr-by-name', 'bench')).includes(String(primaryPort)),
  );
  return { port };
}

async function cluster(node, primaries) {
  const nodes = [];
  for (let i = 0; i < primaries; i++)
    nodes.push(await node(['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf']));
  if (primaries === 1) await cli(nodes[0].port, 'CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  else
    await exec('redis-cli', [
      '--cluster',
      'create',
      ...nodes.map((n) => `127.0.0.1:${n.port}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ]);
  await until(async () =>
    (await Promise.all(nodes.map((n) => cli(n.port, 'CLUSTER', 'INFO')))).every((s) => s.includes('cluster_state:ok')),
  );
  return { url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}`, pids: nodes.map((n) => n.pid) };
}
