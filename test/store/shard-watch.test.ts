import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { newCircuit } from '../../src/domain/circuit.js';
import { CircuitCache } from '../../src/store/redis/redis-cache.js';
import { CHECK_MS, ShardWatch, type ShardChannels, type ShardHandlers } from '../../src/store/redis/shard-watch.js';
import { ALL_SHARDS, shardOf } from '../../src/store/redis/shards.js';

// The per-shard trust of a Cluster's changes subscription (src/store/redis/shard-watch.ts), with a
// stand-in subscriber: a shard's part of the cache is trusted only between a confirmation and a
// loss, and a gap in a shard's versions (a skipped message, or a counter no message caught up
// with) is treated as a loss: distrusted and subscribed again.

const SETTINGS = { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 };

/** A name in each of two different shards. */
function twoShards(): [string, string] {
  const first = 'alpha';
  for (let i = 0; ; i++) if (shardOf(`beta${i}`) !== shardOf(first)) return [first, `beta${i}`];
}

function setup() {
  let handlers!: ShardHandlers;
  const resubscribes: number[] = [];
  const channels: ShardChannels = {
    sharded: true,
    start: (_names, h) => void (handlers = h),
    resubscribe: (shard) => void resubscribes.push(shard),
  };
  const cache = new CircuitCache();
  const counters = ALL_SHARDS.map(() => 0);
  const delivered: string[] = [];
  let rebuilds = 0;
  const watch = new ShardWatch(
    channels,
    ALL_SHARDS.map((s) => `ch${s}`),
    cache,
    async (shard) => counters[shard]!,
    (message) => void delivered.push(message),
    () => void rebuilds++,
    pino({ level: 'silent' }),
  );
  const hold = (name: string, version: number) =>
    cache.offer(name, { version, circuit: { ...newCircuit(name, SETTINGS, 0), id: 1 } });
  const message = (shard: number, version: number, name: string) =>
    handlers.message(shard, `${version}\n1\n${name}\n${JSON.stringify(newCircuit(name, SETTINGS, 0))}`);
  return {
    watch,
    cache,
    counters,
    delivered,
    resubscribes,
    hold,
    message,
    handlers: () => handlers,
    rebuilds: () => rebuilds,
  };
}

const settle = () => vi.advanceTimersByTimeAsync(0);

describe('ShardWatch: per-shard trust of the Cluster changes subscription', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('is ready once every shard is confirmed, and trusts only confirmed shards', async () => {
    const t = setup();
    const [a, b] = twoShards();
    let ready = false;
    void t.watch.ready.then(() => (ready = true));
    t.handlers().confirmed(shardOf(a));
    await settle();
    expect(ready).toBe(false);
    t.hold(a, 1);
    t.hold(b, 1);
    expect(t.cache.get(a)?.version).toBe(1);
    expect(t.cache.get(b)).toBeUndefined(); // its shard is not confirmed yet
    for (const shard of ALL_SHARDS) if (shard !== shardOf(a)) t.handlers().confirmed(shard);
    await settle();
    expect(ready).toBe(true);
    expect(t.rebuilds()).toBe(0); // a first confirmation is no resubscription
    t.watch.stop();
  });

  it('a lost shard empties only its own part of the cache, refuses entries until confirmed, then tells copies to reload', async () => {
    const t = setup();
    const [a, b] = twoShards();
    for (const shard of ALL_SHARDS) t.handlers().confirmed(shard);
    await settle();
    t.hold(a, 1);
    t.hold(b, 1);
    t.handlers().lost(shardOf(a));
    expect(t.cache.get(a)).toBeUndefined();
    expect(t.cache.get(b)?.version).toBe(1); // another shard's subscription is still up
    t.hold(a, 2);
    expect(t.cache.get(a)).toBeUndefined(); // a read while the shard is lost is not kept
    t.handlers().confirmed(shardOf(a));
    await settle();
    expect(t.rebuilds()).toBe(1);
    t.hold(a, 3);
    expect(t.cache.get(a)?.version).toBe(3);
    t.watch.stop();
  });

  it('a message whose version skips ahead of the baseline is a gap: the shard is distrusted and subscribed again', async () => {
    const t = setup();
    const [a, b] = twoShards();
    const shard = shardOf(a);
    t.counters[shard] = 10;
    for (const s of ALL_SHARDS) t.handlers().confirmed(s);
    await settle(); // the baselines are read: 10 for this shard
    t.hold(a, 10);
    t.hold(b, 1);
    t.message(shard, 9, a); // before the baseline: no gap
    t.message(shard, 11, a);
    t.message(shard, 12, a);
    expect(t.resubscribes).toEqual([]);
    expect(t.cache.get(a)?.version).toBe(10); // still held: the shard is trusted
    t.message(shard, 14, a); // 13 never came
    expect(t.resubscribes).toEqual([shard]);
    expect(t.cache.get(a)).toBeUndefined();
    expect(t.cache.get(b)?.version).toBe(1);
    expect(t.delivered).toHaveLength(4); // every message still reaches the listeners
    t.hold(a, 14);
    expect(t.cache.get(a)).toBeUndefined(); // distrusted until the new subscription is confirmed
    t.counters[shard] = 14;
    t.handlers().confirmed(shard);
    await settle();
    expect(t.rebuilds()).toBe(1);
    t.message(shard, 15, a);
    expect(t.resubscribes).toEqual([shard]); // in order again from the new baseline
    t.watch.stop();
  });

  it('a counter above the last message at two checks in a row is a loss nobody announced', async () => {
    const t = setup();
    const [a] = twoShards();
    const shard = shardOf(a);
    for (const s of ALL_SHARDS) t.handlers().confirmed(s);
    await settle();
    t.counters[shard] = 1; // a write whose message is on its way
    await vi.advanceTimersByTimeAsync(CHECK_MS);
    t.message(shard, 1, a); // it arrives before the next check
    await vi.advanceTimersByTimeAsync(CHECK_MS);
    await vi.advanceTimersByTimeAsync(CHECK_MS);
    expect(t.resubscribes).toEqual([]);
    t.counters[shard] = 2; // a write whose message never comes
    t.hold(a, 1);
    await vi.advanceTimersByTimeAsync(CHECK_MS);
    expect(t.resubscribes).toEqual([]);
    await vi.advanceTimersByTimeAsync(CHECK_MS);
    expect(t.resubscribes).toEqual([shard]);
    expect(t.cache.get(a)).toBeUndefined();
    t.watch.stop();
  });
});
