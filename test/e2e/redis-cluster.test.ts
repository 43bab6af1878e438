import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisKeys } from '../../src/store/redis/redis-keys.js';
import { SHARD_TAGS, slotOf } from '../../src/store/redis/shards.js';
import { requestJson } from '../fresh-request.js';
import { openStream } from '../observe/sse-client.js';
import { clusterCli, NODE_TIMEOUT_MS, startCluster, type RedisCluster } from '../redis/cluster.js';
import { refusedStart } from '../refused-start.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { until } from '../redis/until.js';

// Two circuitlog hosts on a real Redis Cluster of 3 primaries and 3 replicas (loopback, random ports).
let cluster: RedisCluster;
let a: ServerProcess;
let b: ServerProcess;
const keys = new RedisKeys('circuitlog:');
const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
const request = (url: string, method = 'GET', body?: unknown) => requestJson(url, method, body, agent);

/** A start on a cluster URL whose ports nothing listens on: refused (asserted below). */
async function refusedWithNoNode() {
  const closed = await Promise.all(
    [0, 1].map(
      () =>
        new Promise<number>((resolve) => {
          const s = net.createServer().listen(0, '127.0.0.1', () => {
            const { port } = s.address() as net.AddressInfo;
            s.close(() => resolve(port));
          });
        }),
    ),
  );
  const refused = await refusedStart({
    CIRCUITLOG_STORE: `redis+cluster://:s3cret@127.0.0.1:${closed[0]},127.0.0.1:${closed[1]}`,
  });
  return { closed, ...refused };
}
let noNode: ReturnType<typeof refusedWithNoNode>;

beforeAll(async () => {
  // The refused start mostly waits on its retries: it runs while the cluster starts.
  noNode = refusedWithNoNode();
  noNode.catch(() => {}); // awaited, and any failure reported, by its test
  cluster = await startCluster(3, 1);
  const file = path.join(tempDir(), 'c.yaml');
  fs.writeFileSync(file, 'circuit_defaults:\n  failure_threshold: 100000\n');
  const env = { CIRCUITLOG_STORE: cluster.url, CIRCUITLOG_CONFIG: file };
  [a, b] = await Promise.all([startServer(env, { detached: true }), startServer(env, { detached: true })]);
}, 60_000);

afterAll(async () => {
  await Promise.all([a, b].filter(Boolean).map((h) => h.killGroup()));
  agent.destroy();
  await cluster?.stop();
});

/** A circuit with its own policy (PATCH creates it). */
async function circuit(host: ServerProcess, name: string, policy: Record<string, unknown>): Promise<void> {
  const answer = await requestJson(`${host.url}/circuits/${name}`, 'PATCH', policy, agent);
  expect(answer.status, JSON.stringify(answer.json)).toBeLessThan(300);
}

describe('Redis Cluster (3 primaries, 3 replicas), two hosts', () => {
  it('spreads 10,000 circuits over every primary, and GET /circuits pages through all of them exactly once', async () => {
    // Two batches of 1,000 at a time, one through each host.
    for (let pair = 0; pair < 10_000; pair += 2_000) {
      const answers = await Promise.all(
        [pair, pair + 1_000].map((start) => {
          const outcomes = Array.from({ length: 1_000 }, (_, i) => ({ circuit: `spread-${start + i}`, success: true }));
          return request(`${(start / 1_000) % 2 ? a.url : b.url}/outcomes`, 'POST', { outcomes });
        }),
      );
      for (const answer of answers) expect(answer.status, JSON.stringify(answer.json).slice(0, 300)).toBe(200);
    }
    const primaries = await cluster.primaries();
    expect(primaries).toHaveLength(3);
    const held = await Promise.all(
      primaries.map(async (p) => {
        let count = 0;
        for (const k of keys.shards) {
          const slot = slotOf(SHARD_TAGS[k.shard]!);
          if (p.slots.some(([lo, hi]) => slot >= lo && slot <= hi))
            count += Number(await clusterCli(p.port, 'ZCARD', k.index));
        }
        return count;
      }),
    );
    console.log(`circuits per primary: ${held.join(', ')}`);
    for (const count of held) expect(count).toBeGreaterThan(1_000);
    expect(held.reduce((x, y) => x + y, 0)).toBeGreaterThanOrEqual(10_000);
    const seen = new Set<string>();
    let cursor: string | null = null;
    for (let page = 0; page < 100; page++) {
      const answer: { json: { circuits: { name: string }[]; next_cursor: string | null } } = await request(
        `${a.url}/circuits?limit=500${cursor ? `&cursor=${cursor}` : ''}`,
      );
      for (const c of answer.json.circuits) {
        expect(seen.has(c.name), c.name).toBe(false);
        seen.add(c.name);
      }
      cursor = answer.json.next_cursor;
      if (cursor === null) break;
    }
    expect([...seen].filter((n) => n.startsWith('spread-'))).toHaveLength(10_000);
  }, 120_000);

  it('counts 2,000 concurrent failures on one circuit through both hosts exactly', async () => {
    const answers = await Promise.all(
      Array.from({ length: 2_000 }, (_, i) => request(`${(i % 2 ? a : b).url}/circuits/pay/failure`, 'POST', {})),
    );
    expect(answers.filter((r) => r.status !== 200)).toEqual([]);
    for (const host of [a, b]) {
      await until(
        async () => (await request(`${host.url}/circuits/pay`)).json.failure_count === 2_000,
        'both hosts to show 2,000',
      );
      expect((await request(`${host.url}/circuits/pay`)).json).toMatchObject({ state: 'closed', failure_count: 2_000 });
    }
  }, 60_000);

  it('admits exactly half_open_max_calls probes across both hosts, and a trip on A is refused on B within 1 s', async () => {
    await circuit(a, 'probe', { failure_threshold: 1, timeout_seconds: 1, half_open_max_calls: 3 });
    await until(async () => (await request(`${b.url}/circuits/probe`)).status === 200, 'B to see the circuit');
    expect((await request(`${b.url}/circuits/probe/allowed`)).status).toBe(200); // B holds it, closed
    const tripped = Date.now();
    expect((await request(`${a.url}/circuits/probe/failure`, 'POST', {})).json.state).toBe('open');
    await until(async () => (await request(`${b.url}/circuits/probe/allowed`)).status === 503, 'B to refuse', 1_000);
    console.log(`trip on A refused on B after ${Date.now() - tripped} ms`);
    const open = (await request(`${b.url}/circuits/probe`)).json;
    await new Promise((r) => setTimeout(r, Date.parse(open.open_until) - Date.now() + 50));
    const probes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => request(`${(i % 2 ? a : b).url}/circuits/probe/allowed`)),
    );
    expect(probes.filter((r) => r.status === 200)).toHaveLength(3);
  }, 30_000);

  it('resumes /events/stream on the other host with the cursor after a reconnect: loses and repeats nothing', async () => {
    const names = Array.from({ length: 24 }, (_, i) => `sse-${i}`); // over many shards
    for (const name of names) await circuit(a, name, { failure_threshold: 1, timeout_seconds: 60 });
    const first = await openStream(`${a.url}/events/stream?prefix=sse-`);
    const got: { circuit: string; to: string }[] = [];
    let last = '';
    try {
      for (const name of names.slice(0, 12))
        await request(`${(name.length % 2 ? a : b).url}/circuits/${name}/failure`, 'POST', {});
      for (let i = 0; i < 12; i++) {
        const e = await first.next(2_000);
        got.push({ circuit: e.data.circuit, to: e.data.to });
        last = e.rawId;
      }
    } finally {
      first.close();
    }
    // While no stream is open: the other 12 trip, and the first 12 are reset, through both hosts.
    for (const name of names.slice(12))
      await request(`${(name.length % 2 ? b : a).url}/circuits/${name}/failure`, 'POST', {});
    for (const name of names.slice(0, 12))
      await request(`${(name.length % 2 ? a : b).url}/circuits/${name}/reset`, 'POST', {});
    const resumed = await openStream(`${b.url}/events/stream?prefix=sse-`, { 'last-event-id': last });
    try {
      expect(resumed.status).toBe(200);
      for (let i = 0; i < 24; i++) {
        const e = await resumed.next(3_000);
        expect(e.event).toBe('transition');
        got.push({ circuit: e.data.circuit, to: e.data.to });
      }
      await new Promise((r) => setTimeout(r, 300));
      expect(resumed.queued).toEqual([]); // nothing more: no repeat
    } finally {
      resumed.close();
    }
    const expected = [
      ...names.map((n) => ({ circuit: n, to: 'open' })),
      ...names.slice(0, 12).map((n) => ({ circuit: n, to: 'closed' })),
    ];
    const key = (t: { circuit: string; to: string }) => `${t.circuit}>${t.to}`;
    expect(got.map(key).sort()).toEqual(expected.map(key).sort());
    for (const name of names.slice(0, 12))
      expect(got.filter((t) => t.circuit === name).map((t) => t.to)).toEqual(['open', 'closed']); // per-circuit order
  }, 60_000);

  it('follows a primary failover (kill -9; its replica is promoted) without a restart', async () => {
    const name = 'failover';
    expect((await request(`${a.url}/circuits/${name}/failure`, 'POST', {})).status).toBe(200);
    const slot = slotOf(SHARD_TAGS[keys.of(name).shard]!);
    const owner = (await cluster.primaries()).find((p) => p.slots.some(([lo, hi]) => slot >= lo && slot <= hi))!;
    const node = cluster.nodes.find((n) => n.port === owner.port)!;
    let acknowledged = 1;
    const ownerOf = async () =>
      (await cluster.primaries().catch(() => [])).find((p) => p.slots.some(([lo, hi]) => slot >= lo && slot <= hi));
    await node.stop('SIGKILL');
    const killed = Date.now();
    // Promoting the replica is Redis's part (cluster-node-timeout, then an election); on a loaded machine
    // it can take several seconds. What is asserted of circuitlog is how soon it follows once it happened.
    let promotedAt = 0;
    let blackoutEnd = 0;
    let last: unknown[] = [];
    const deadline = killed + 45_000;
    while (Date.now() < deadline) {
      if (promotedAt === 0 && ![undefined, owner.port].includes((await ownerOf())?.port)) promotedAt = Date.now();
      const answers = await Promise.all(
        [a, b].map((h) => request(`${h.url}/circuits/${name}/failure`, 'POST', {}).catch(() => ({ status: 0 }))),
      );
      acknowledged += answers.filter((r) => r.status === 200).length;
      last = answers;
      if (answers.every((r) => r.status === 200)) {
        blackoutEnd = Date.now();
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const tail = (h: ServerProcess) => h.stderr().slice(-1_500);
    const nodes = await clusterCli(cluster.nodes.find((n) => n !== node)!.port, 'CLUSTER', 'NODES').catch(String);
    const why = `last ${JSON.stringify(last)}; cluster: ${nodes}; A: ${tail(a)}; B: ${tail(b)}`;
    expect(promotedAt, `Redis promoted the replica; ${why}`).toBeGreaterThan(0);
    expect(blackoutEnd, `both hosts answered again; ${why}`).toBeGreaterThan(0);
    expect(blackoutEnd - promotedAt, `followed the promotion within 5 s; ${why}`).toBeLessThan(5_000);
    console.log(
      `cluster failover: writes to the killed primary's slots answered again after ${blackoutEnd - killed} ms, ${Math.max(0, blackoutEnd - promotedAt)} ms after the test saw the promotion (cluster-node-timeout ${NODE_TIMEOUT_MS} ms)`,
    );
    const promoted = (await cluster.primaries()).find((p) => p.slots.some(([lo, hi]) => slot >= lo && slot <= hi))!;
    expect(promoted.port).not.toBe(owner.port);
    for (let i = 0; i < 10; i++) {
      expect((await request(`${(i % 2 ? a : b).url}/circuits/${name}/failure`, 'POST', {})).status).toBe(200);
      acknowledged++;
    }
    const stored = JSON.parse(await clusterCli(promoted.port, 'HGET', keys.circuit(name), 'c')).failureCount as number;
    console.log(
      `acknowledged ${acknowledged}, on the promoted primary ${stored} (replicas_ack 0: asynchronous replication)`,
    );
    expect(stored).toBeLessThanOrEqual(acknowledged + 10); // at most the unanswered attempts more (applied, answer lost)
    for (const host of [a, b]) expect((await request(`${host.url}/circuits/probe/allowed`)).status).toBeLessThan(600); // other shards answer
    // B hears A's last write through the change subscription: bounded wait, then the exact count.
    await until(async () => (await request(`${b.url}/circuits/${name}`)).json.failure_count === stored, 'B to show it');
    expect((await request(`${b.url}/circuits/${name}`)).json.failure_count).toBe(stored);
  }, 90_000);
});

describe('redis+cluster:// that cannot work stops the start with exit 2 within 10 s, naming CIRCUITLOG_STORE, no password', () => {
  it('no node reachable', async () => {
    const { closed, code, stderr } = await noNode; // started in beforeAll
    expect(code).toBe(2);
    expect(stderr).toMatch(
      new RegExp(
        `CIRCUITLOG_STORE: cannot reach Redis at redis\\+cluster://:\\*\\*\\*@127\\.0\\.0\\.1:${closed[0]},127\\.0\\.0\\.1:${closed[1]}: `,
      ),
    );
    expect(stderr).not.toMatch(/s3cret/);
  });
});
