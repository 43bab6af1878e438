import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisKeys } from '../../src/store/redis/redis-keys.js';
import { SHARD_TAGS, shardOf, slotOf } from '../../src/store/redis/shards.js';
import { requestJson } from '../fresh-request.js';
import { clusterCli, startCluster, type RedisCluster } from '../redis/cluster.js';
import { moveSlot } from '../redis/reshard.js';
import { startServer, type ServerProcess } from '../server-process.js';
import { until } from '../redis/until.js';

// Sharded pub/sub on a real Redis Cluster of 3 primaries and 3 replicas, two circuitlog hosts:
// each write's `changes` message is SPUBLISHed on its shard's channel, so only the shard's
// primary handles it (a plain PUBLISH goes over the cluster bus to every node), and each host
// SSUBSCRIBEs every shard's channel on the primary of its slot, following a slot move and a
// failover, with the shard's cache distrusted meanwhile.
let cluster: RedisCluster;
let a: ServerProcess;
let b: ServerProcess;
const keys = new RedisKeys('circuitlog:');
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
const request = (url: string, method = 'GET', body?: unknown) => requestJson(url, method, body, agent);
const enc = encodeURIComponent;
const SHARD = shardOf('sp/x'); // every circuit of this file is in this shard
const SLOT = slotOf(SHARD_TAGS[SHARD]!);
const CHANNEL = keys.shards[SHARD]!.changes;

beforeAll(async () => {
  cluster = await startCluster(3, 1);
  const env = { CIRCUITLOG_STORE: cluster.url };
  [a, b] = await Promise.all([startServer(env, { detached: true }), startServer(env, { detached: true })]);
}, 60_000);

afterAll(async () => {
  await Promise.all([a, b].filter(Boolean).map((h) => h.killGroup()));
  agent.destroy();
  await cluster?.stop();
});

const owns = (p: { slots: [number, number][] }) => p.slots.some(([lo, hi]) => SLOT >= lo && SLOT <= hi);
const ownerOf = async () => (await cluster.primaries().catch(() => [])).find(owns);

/** How many clients have the shard's channel SSUBSCRIBEd on a node. */
async function shardSubscribers(port: number): Promise<number> {
  const reply = (await clusterCli(port, 'PUBSUB', 'SHARDNUMSUB', CHANNEL)).split('\n');
  return Number(reply[1] ?? 0);
}

/** A node's pub/sub work: SPUBLISH and PUBLISH calls (scripts' included), and publish messages from the bus. */
async function pubsubWork(port: number): Promise<{ spublish: number; publish: number; busPublish: number }> {
  const stats = await clusterCli(port, 'INFO', 'commandstats');
  const info = await clusterCli(port, 'CLUSTER', 'INFO');
  const count = (text: string, pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? 0);
  return {
    spublish: count(stats, /cmdstat_spublish:calls=(\d+)/),
    publish: count(stats, /cmdstat_publish:calls=(\d+)/),
    busPublish: count(info, /cluster_stats_messages_publish_received:(\d+)/),
  };
}

/** The circuit, tripping at the first failure, held (closed) by host B's cache; then tripped on A: B refuses within 1 s. */
async function tripOnARefusedOnB(name: string): Promise<number> {
  const patched = await request(`${a.url}/circuits/${enc(name)}`, 'PATCH', {
    failure_threshold: 1,
    timeout_seconds: 3600,
  });
  expect(patched.status, JSON.stringify(patched.json)).toBeLessThan(300);
  await until(async () => (await request(`${b.url}/circuits/${enc(name)}/allowed`)).status === 200, 'B to allow');
  const tripped = Date.now();
  expect((await request(`${a.url}/circuits/${enc(name)}/failure`, 'POST', {})).json.state).toBe('open');
  await until(
    async () => (await request(`${b.url}/circuits/${enc(name)}/allowed`)).status === 503,
    'B to refuse',
    1_000,
  );
  return Date.now() - tripped;
}

describe('Redis Cluster sharded pub/sub (SPUBLISH / SSUBSCRIBE), two hosts', () => {
  it("publishes each write with SPUBLISH on its shard's channel: only the shard's primary handles it", async () => {
    const primaries = await cluster.primaries();
    const owner = primaries.find(owns)!;
    const others = primaries.filter((p) => p !== owner);
    expect(others).toHaveLength(2);
    await until(async () => (await shardSubscribers(owner.port)) === 2, 'both hosts to subscribe on the owner');
    for (const p of others) expect(await shardSubscribers(p.port)).toBe(0);
    const before = await Promise.all(primaries.map((p) => pubsubWork(p.port)));
    const WRITES = 60;
    for (let i = 0; i < WRITES; i++) {
      const answer = await request(`${(i % 2 ? a : b).url}/circuits/sp%2Fcount/failure`, 'POST', {});
      expect(answer.status).toBe(200);
    }
    const after = await Promise.all(primaries.map((p) => pubsubWork(p.port)));
    const grown = primaries.map((p, i) => ({
      port: p.port,
      spublish: after[i]!.spublish - before[i]!.spublish,
      publish: after[i]!.publish - before[i]!.publish,
      busPublish: after[i]!.busPublish - before[i]!.busPublish,
    }));
    console.log(`${WRITES} writes to shard ${SHARD} (primary ${owner.port}), per primary: ${JSON.stringify(grown)}`);
    const mine = grown[primaries.indexOf(owner)]!;
    expect(mine.spublish).toBeGreaterThanOrEqual(WRITES); // one per write (and per write of the mirror-free hosts: none more)
    expect(mine.publish).toBe(0);
    for (const p of others) {
      const theirs = grown[primaries.indexOf(p)]!;
      // With a plain PUBLISH every node received each write's message from the cluster bus.
      expect(theirs).toMatchObject({ spublish: 0, publish: 0, busPublish: 0 });
    }
  }, 30_000);

  it("follows the shard's slot moving to another primary: both hosts subscribe there, and a trip on A is refused on B within 1 s", async () => {
    const primaries = await cluster.primaries();
    const from = primaries.find(owns)!;
    const to = primaries.find((p) => !owns(p))!;
    const other = primaries.find((p) => p !== from && p !== to)!;
    expect(await tripOnARefusedOnB('sp/before-move')).toBeLessThan(1_000);
    await request(`${b.url}/circuits/sp%2Fmoving/allowed`); // B holds a circuit of the shard while it moves
    const moved = await moveSlot(SLOT, from.port, to.port, [other.port], {
      betweenBatchesMs: 20,
      holdMs: 100,
      batch: 10,
    });
    expect((await ownerOf())?.port).toBe(to.port);
    // Redis unsubscribes the channel on the old owner when the slot leaves it; both hosts subscribe on the new one.
    await until(async () => (await shardSubscribers(to.port)) === 2, 'both hosts to subscribe on the new owner');
    expect(await shardSubscribers(from.port)).toBe(0);
    const lag = await tripOnARefusedOnB('sp/after-move');
    console.log(`slot ${SLOT} moved (${moved.keys} keys); a trip on A after it refused on B after ${lag} ms`);
    for (const host of [a, b]) expect(host.logs.filter((l) => l.event === 'redis_changes_gap')).toEqual([]);
  }, 60_000);

  it('a Cluster emptied under the hosts (FLUSHALL on every primary): both notice, and a trip on A is refused on B within 1 s', async () => {
    expect(await tripOnARefusedOnB('sp/before-flush')).toBeLessThan(1_000); // B holds it open
    for (const p of await cluster.primaries()) await clusterCli(p.port, 'FLUSHALL');
    const noticed = () => [a, b].every((h) => h.logs.some((l) => l.event === 'redis_store_reset'));
    await until(async () => noticed(), 'both hosts to notice the reset', 5_000);
    // The circuit is gone with the store: B admits it again (a fresh, closed circuit), then a new trip is refused.
    await until(
      async () => (await request(`${b.url}/circuits/sp%2Fbefore-flush/allowed`)).status === 200,
      'B to admit the emptied circuit',
      3_000,
    );
    const lag = await tripOnARefusedOnB('sp/after-flush');
    console.log(`after FLUSHALL of every primary: a trip on A refused on B after ${lag} ms`);
  }, 30_000);

  it("follows a failover of the shard's primary (kill -9, its replica promoted): a trip on A is refused on B within 1 s", async () => {
    const owner = (await ownerOf())!;
    await node(owner.port).stop('SIGKILL');
    await until(async () => ![undefined, owner.port].includes((await ownerOf())?.port), 'the replica promoted', 45_000);
    const promoted = (await ownerOf())!;
    await until(
      async () => (await shardSubscribers(promoted.port)) === 2,
      'both hosts to subscribe on the promoted primary',
      10_000,
    );
    await until(
      async () => (await request(`${a.url}/circuits/sp%2Fafter-failover`, 'PATCH', {})).status < 300,
      'A to write again',
      10_000,
    );
    const lag = await tripOnARefusedOnB('sp/after-failover');
    console.log(`failover to ${promoted.port}: a trip on A refused on B after ${lag} ms`);
  }, 90_000);
});

function node(port: number) {
  return cluster.nodes.find((n) => n.port === port)!;
}
