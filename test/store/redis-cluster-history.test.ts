// Issue 31 on a Redis Cluster: a circuit's history stream shares its circuit's slot, so the
// compare-and-set script that writes both runs on one node.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit } from '../../src/domain/circuit.js';
import { decodeEntry } from '../../src/domain/history.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { silentLogger } from '../helper.js';
import { clusterCli, startCluster, type RedisCluster } from '../redis/cluster.js';

const T0 = 1_700_000_000_000;
const settings = { failureThreshold: 2, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
let cluster: RedisCluster;
let opened: OpenedRedis | undefined;

beforeAll(async () => {
  cluster = await startCluster(3, 0);
}, 60_000);
afterAll(async () => {
  await opened?.close();
  await cluster?.stop();
});

describe('the Redis outcome history on a Cluster', () => {
  it('keeps each circuit history in its circuit slot, written with it in one batch across shards', async () => {
    opened = await openRedisStore({ url: cluster.url, logger: silentLogger, prefix: `t-${randomUUID()}:` });
    const { store } = opened;
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
});
