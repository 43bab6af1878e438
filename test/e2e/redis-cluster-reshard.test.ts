import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHARD_TAGS, shardOf, slotOf } from '../../src/store/redis/shards.js';
import { requestJson } from '../fresh-request.js';
import { openStream } from '../observe/sse-client.js';
import { startCluster, type RedisCluster } from '../redis/cluster.js';
import { moveSlot, redirectCounts } from '../redis/reshard.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Two circuitlog hosts on a real Redis Cluster of 3 primaries (loopback, random ports) while the
// slot of one shard moves from one primary to another under load, as `redis-cli --cluster reshard` does it.
let cluster: RedisCluster;
let a: ServerProcess;
let b: ServerProcess;
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
const enc = encodeURIComponent; // a '/' in a circuit name is %2F in its path
const request = (url: string, method = 'GET', body?: unknown) => requestJson(url, method, body, agent);

const COUNTED = ['mv/c0', 'mv/c1', 'mv/c2', 'mv/c3']; // with a transition history: every key of the write exists
const FRESH = 'mv/fresh'; // no transition yet: its events list does not exist (a write names a missing key)
const FLIP = 'mv/flip'; // tripped and reset over and over: the transitions SSE must deliver
const ELSEWHERE = 'other-shard';
const MAX_REQUESTS = 4_000; // per worker: the load is bounded whatever the timing

beforeAll(async () => {
  cluster = await startCluster(3, 0);
  const file = path.join(tempDir(), 'c.yaml');
  fs.writeFileSync(file, 'circuit_defaults:\n  failure_threshold: 1000000\n');
  // A write to the moving shard waits (TRYAGAIN, retried) up to the command timeout: 2 s leaves a loaded machine room.
  const env = { CIRCUITLOG_STORE: cluster.url, CIRCUITLOG_CONFIG: file, CIRCUITLOG_STORE_TIMEOUT_MS: '2000' };
  [a, b] = await Promise.all([startServer(env, { detached: true }), startServer(env, { detached: true })]);
}, 60_000);

afterAll(async () => {
  await Promise.all([a, b].filter(Boolean).map((h) => h.killGroup()));
  agent.destroy();
  await cluster?.stop();
});

async function ok(url: string, method = 'GET', body?: unknown) {
  const answer = await request(url, method, body);
  expect([200, 201], `${method} ${url}: ${JSON.stringify(answer.json)}`).toContain(answer.status); // 201: PATCH created it
  return answer.json;
}

/** A circuit of the moved shard with transitions behind it (tripped once, reset), counting failures from 0. */
async function withHistory(name: string): Promise<void> {
  await ok(`${a.url}/circuits/${enc(name)}`, 'PATCH', { failure_threshold: 1, timeout_seconds: 3600 });
  expect((await ok(`${a.url}/circuits/${enc(name)}/failure`, 'POST', {})).state).toBe('open');
  await ok(`${a.url}/circuits/${enc(name)}/reset`, 'POST', {});
  await ok(`${a.url}/circuits/${enc(name)}`, 'PATCH', { failure_threshold: 1_000_000 });
}

interface Tally {
  acked: Map<string, number>;
  failed: { status: number; what: string }[];
  requests: number;
}

/** One load worker: `step` until `running()` is false or MAX_REQUESTS are sent; every answer tallied. */
async function worker(tally: Tally, running: () => boolean, step: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < MAX_REQUESTS && running(); i++) {
    tally.requests++;
    await step(i);
  }
}

describe('Redis Cluster resharding under load (3 primaries, two hosts)', () => {
  it('follows a shard slot moving between primaries (ASK, then MOVED): exact counts, no error, SSE goes on, no restart', async () => {
    const shard = shardOf('mv/x');
    for (const name of [...COUNTED, FRESH, FLIP]) expect(shardOf(name)).toBe(shard);
    expect(shardOf(ELSEWHERE)).not.toBe(shard);
    const slot = slotOf(SHARD_TAGS[shard]!);
    const primaries = await cluster.primaries();
    const owns = (p: { slots: [number, number][] }) => p.slots.some(([lo, hi]) => slot >= lo && slot <= hi);
    const from = primaries.find(owns)!;
    const to = primaries.find((p) => !owns(p))!;
    const other = primaries.find((p) => p !== from && p !== to)!;

    for (const name of COUNTED) await withHistory(name);
    await ok(`${a.url}/circuits/${enc(FLIP)}`, 'PATCH', { failure_threshold: 1, timeout_seconds: 3600 });
    await ok(`${a.url}/circuits/${enc(FRESH)}`, 'PATCH', { failure_threshold: 1_000_000 });
    await ok(`${b.url}/circuits/${enc(ELSEWHERE)}/failure`, 'POST', {});
    const before = new Map<string, number>();
    for (const name of [...COUNTED, FRESH, ELSEWHERE])
      before.set(name, (await ok(`${b.url}/circuits/${enc(name)}`)).failure_count);
    const pids = [a.child.pid, b.child.pid];
    const atStart = await redirectCounts(from.port);
    const targetAtStart = await redirectCounts(to.port);

    const stream = await openStream(`${b.url}/events/stream?prefix=${encodeURIComponent(FLIP)}`);
    const tally: Tally = { acked: new Map(), failed: [], requests: 0 };
    const ack = (name: string, n = 1) => tally.acked.set(name, (tally.acked.get(name) ?? 0) + n);
    const check = async (what: string, url: string, method = 'GET', body?: unknown) => {
      const answer = await request(url, method, body).catch(() => ({ status: 0, json: null }));
      if (answer.status !== 200) tally.failed.push({ status: answer.status, what });
      return answer;
    };
    let running = true;
    let flips = 0;
    const hosts = [a, b];
    const load = [
      // Single failures on each counted circuit through both hosts.
      ...hosts.flatMap((h, hi) =>
        [0, 1].map((w) =>
          worker(
            tally,
            () => running,
            async (i) => {
              const name = [...COUNTED, FRESH][(i + w + hi) % (COUNTED.length + 1)]!;
              if ((await check(name, `${h.url}/circuits/${enc(name)}/failure`, 'POST', {})).status === 200) ack(name);
            },
          ),
        ),
      ),
      // Batches over the moved shard and another one (each shard's part is one script).
      ...hosts.map((h) =>
        worker(
          tally,
          () => running,
          async () => {
            const outcomes = [...COUNTED, FRESH, ELSEWHERE].map((circuit) => ({ circuit, success: false }));
            if ((await check('batch', `${h.url}/outcomes`, 'POST', { outcomes })).status === 200)
              for (const o of outcomes) ack(o.circuit);
          },
        ),
      ),
      // Calls asking whether they may go ahead.
      ...hosts.map((h) =>
        worker(
          tally,
          () => running,
          async (i) => {
            await check('allowed', `${h.url}/circuits/${enc([...COUNTED, FRESH][i % 5]!)}/allowed`);
          },
        ),
      ),
      // Trip and reset one circuit of the shard, one after the other: each acknowledged one is a transition.
      worker(
        tally,
        () => running,
        async (i) => {
          const route = i % 2 === 0 ? 'failure' : 'reset';
          const answer = await check(FLIP, `${a.url}/circuits/${enc(FLIP)}/${route}`, 'POST', {});
          if (answer.status === 200) flips++;
          await new Promise((r) => setTimeout(r, 20));
        },
      ),
    ];
    let migration: { keys: number; migratingMs: number };
    try {
      await new Promise((r) => setTimeout(r, 500));
      migration = await moveSlot(slot, from.port, to.port, [other.port], {
        batch: 10,
        betweenBatchesMs: 50,
        holdMs: 300,
      });
      // Load on after the hand-over until a client still at the old node has been answered MOVED
      // (an event, not a time: on a busy machine the first one can take more than a second),
      // and at most 15 s.
      for (let waited = 0; waited < 15_000; waited += 100) {
        if ((await redirectCounts(from.port)).moved > atStart.moved) break;
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      running = false;
      await Promise.all(load);
    }

    const redirects = await redirectCounts(from.port);
    const target = await redirectCounts(to.port);
    const asking = target.asking;
    const byStatus: Record<string, number> = {};
    for (const f of tally.failed) byStatus[`${f.status} ${f.what}`] = (byStatus[`${f.status} ${f.what}`] ?? 0) + 1;
    console.log(
      `reshard: slot ${slot} (shard ${shard}) ${from.port} -> ${to.port}, ${migration.keys} keys, in migration ${migration.migratingMs} ms; ` +
        `${tally.requests} requests, non-200: ${tally.failed.length} ${JSON.stringify(byStatus)}; ` +
        `source answered ASK ${redirects.ask - atStart.ask}, MOVED ${redirects.moved - atStart.moved}, TRYAGAIN ${redirects.tryagain - atStart.tryagain}; target got ASKING ${asking - targetAtStart.asking}, answered TRYAGAIN ${target.tryagain - targetAtStart.tryagain}`,
    );
    // The slot is the target's now, and the clients were redirected on the way: ASK while it moved, MOVED after.
    expect((await cluster.primaries()).find(owns)!.port).toBe(to.port);
    expect(redirects.ask - atStart.ask).toBeGreaterThan(0);
    expect(asking - targetAtStart.asking).toBeGreaterThan(0);
    expect(redirects.moved - atStart.moved).toBeGreaterThan(0);
    // Every request answered 200: a write to the migrating slot waits (TRYAGAIN, retried) instead of failing.
    expect(tally.failed).toEqual([]);
    // Every acknowledged outcome is counted, exactly, on both hosts.
    for (const name of [...COUNTED, FRESH, ELSEWHERE]) {
      const expected = before.get(name)! + (tally.acked.get(name) ?? 0);
      expect(tally.acked.get(name) ?? 0, name).toBeGreaterThan(0);
      for (const h of hosts)
        expect((await ok(`${h.url}/circuits/${enc(name)}`)).failure_count, `${name} on ${h.url}`).toBe(expected);
    }
    // SSE on host B delivered every transition of the circuit in the moved shard, in order.
    const got: string[] = [];
    while (got.length < flips) {
      const e = await stream.next(3_000);
      if (e.event === 'transition') got.push(e.data.to);
    }
    stream.close();
    expect(flips).toBeGreaterThan(10);
    expect(got).toEqual(Array.from({ length: flips }, (_, i) => (i % 2 === 0 ? 'open' : 'closed')));
    // The hosts never restarted.
    expect([a.child.pid, b.child.pid]).toEqual(pids);
    for (const h of hosts) expect(h.child.exitCode).toBeNull();
  }, 90_000);
});
