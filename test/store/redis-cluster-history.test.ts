// Issue 31 on a Redis Cluster: a circuit's history stream shares its circuit's slot, so the
// compare-and-set script that writes both runs on one node.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit } from '../../src/domain/circuit.js';
import { decodeEntry } from '../../src/domain/history.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { silentLogger } from '../helper.js';
import { SHARD_TAGS, slotOf } from '../../src/store/redis/shards.js';
import { clusterCli, startCluster, type RedisCluster } from '../redis/cluster.js';
import { moveSlot } from '../redis/reshard.js';

const T0 = 1_700_000_000_000;
const settings = { failureThreshold: 2, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
let cluster: RedisCluster;
const opened: OpenedRedis[] = [];

beforeAll(async () => {
  cluster = await startCluster(3, 0);
}, 60_000);
afterAll(async () => {
  await Promise.all(opened.map((o) => o.close()));
  await cluster?.stop();
});

/** A store on the cluster; 10 s per command: a write to a moving slot waits on TRYAGAIN, retried. */
async function open(prefix: string): Promise<OpenedRedis> {
  const o = await openRedisStore({ url: cluster.url, logger: silentLogger, prefix, timeoutMs: 10_000 });
  opened.push(o);
  return o;
}

const failure = (name: string, caller: string, now: number) =>
  [
    (c: Circuit | null) => recordOutcome(c ?? newCircuit(name, settings, now), { success: false }, now),
    () => ({ type: 'outcome' as const, t: now, outcome: { success: false, caller } }),
  ] as const;

describe('the Redis outcome history on a Cluster', () => {
  it('keeps each circuit history in its circuit slot, written with it in one batch across shards', async () => {
    const { store } = await open(`t-${randomUUID()}:`);
    const names = Array.from({ length: 8 }, (_, i) => `svc-${i}`);
    const item = (name: string, now: number) => ({
      name,
      step: (c: Circuit | null) => recordOutcome(c ?? newCircuit(name, settings, now), { success: false }, now),
      history: () => ({ type: 'outcome' as const, t: now, outcome: { success: false, caller: name } }),
    });
    await store.applyBatch(names.map((n) => item(n, T0)));
    await store.applyBatch(names.map((n) => item(n, T0 + 1)));
    const port = cluster.nodes[0]!.port;
    const slots = new Set(names.map((n) => store.keys.of(n).shard));
    expect(slots.size).toBeGreaterThan(1); // the batch spans shards, so slots and likely nodes
    for (const name of names) {
      const [circuitSlot, historySlot] = await Promise.all(
        [store.keys.circuit(name), store.keys.history(name)].map((k) => clusterCli(port, 'CLUSTER', 'KEYSLOT', k)),
      );
      expect(historySlot).toBe(circuitSlot);
      const entries = (await store.history(name, { limit: 10 }))!.map((e) => decodeEntry(e.t, e.text));
      expect(entries.map((e) => e?.type)).toEqual(['outcome', 'outcome', 'transition']);
      expect((await store.find(name))?.state).toBe('open');
    }
    expect(await store.delete(names[0]!)).toBe(true);
    expect(await store.history(names[0]!, { limit: 10 })).toBeNull();
  });

  it('keeps exactly the acknowledged outcomes of two hosts while the circuit slot moves to another primary', async () => {
    const prefix = `t-${randomUUID()}:`;
    const [a, b] = [await open(prefix), await open(prefix)];
    const name = 'mv/hist';
    const lots = { ...settings, failureThreshold: 1_000_000 };
    await a.store.apply(name, (c) => recordOutcome(c ?? newCircuit(name, lots, T0), { success: true }, T0));
    const slot = slotOf(SHARD_TAGS[a.store.keys.of(name).shard]!);
    const primaries = await cluster.primaries();
    const owns = (p: { slots: [number, number][] }) => p.slots.some(([lo, hi]) => slot >= lo && slot <= hi);
    const from = primaries.find(owns)!;
    const to = primaries.find((p) => !owns(p))!;
    const other = primaries.find((p) => p !== from && p !== to)!;
    let moving = true;
    const acked: string[] = [];
    const load = async (host: OpenedRedis, id: string) => {
      for (let i = 0; moving && i < 2_000; i++) {
        const caller = `${id}-${i}`;
        await host.store.apply(name, ...failure(name, caller, T0 + 1 + i));
        acked.push(caller);
      }
    };
    const loads = [load(a, 'a'), load(b, 'b')];
    const moved = await moveSlot(slot, from.port, to.port, [other.port], {
      betweenBatchesMs: 50,
      holdMs: 300,
      batch: 1,
    });
    moving = false;
    await Promise.all(loads);
    expect(moved.keys).toBeGreaterThan(0);
    const entries = (await a.store.history(name, { limit: 100_000 }))!.map((e) => decodeEntry(e.t, e.text));
    const callers = entries.flatMap((e) => (e?.type === 'outcome' && e.outcome.caller ? [e.outcome.caller] : []));
    expect(callers.sort()).toEqual(acked.sort());
    expect((await a.store.fetch(name))?.failureCount).toBe(acked.length);
  });
});
