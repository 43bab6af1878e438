// Issue 27 item 9 on Redis: a circuit's caller table lives in a hash of its own (`k:<name>`) and
// every write sends, stores and publishes only what changed of it (caller-hash.ts).
import { randomUUID } from 'node:crypto';
import { createClient } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CallerEntry } from '../../src/domain/caller-state.js';
import { newCircuit, type Circuit, type Step } from '../../src/domain/circuit.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { RedisHousekeeping } from '../../src/store/redis/redis-housekeeping.js';
import { silentLogger } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { until } from '../redis/until.js';

const T0 = 1_700_000_000_000;
const quorum = { minCallers: 2, windowSeconds: 3_600, maxCallers: 1_000 };
const settings = { failureThreshold: 1_000_000, timeoutSeconds: 30, halfOpenMaxCalls: 1, quorum };
const callerId = (i: number) => String(i).padStart(128, 'c'); // 128 characters, as the attack
const entry = (i: number, failures = 1, at = T0): CallerEntry => [callerId(i), failures, at, null, null, 0, null];
const table = (n: number) => Array.from({ length: n }, (_, i) => entry(i));

let redis: RedisServer;
let raw: ReturnType<typeof createClient>;
const opened: OpenedRedis[] = [];

beforeAll(async () => {
  redis = await startRedis();
  raw = createClient({ url: redis.url(), RESP: 2 });
  await raw.connect();
});
afterAll(async () => {
  raw?.destroy();
  await Promise.all(opened.map((o) => o.close()));
  await redis.stop();
});

async function open(prefix: string): Promise<OpenedRedis> {
  const o = await openRedisStore({ url: redis.url(), logger: silentLogger, prefix });
  opened.push(o);
  return o;
}

/** A step that sets the caller table (created with the quorum when absent). */
const setCallers =
  (name: string, callers: (before: readonly CallerEntry[]) => readonly CallerEntry[], now = T0) =>
  (c: Circuit | null): Step => {
    const base = c ?? newCircuit(name, settings, now);
    return { circuit: { ...base, callers: callers(base.callers ?? []), updatedAt: now }, transitions: [] };
  };

/** `{<tag>}:k:<name>`, spelt from the events key so this file runs on a store before the hash too. */
const callersKey = (store: OpenedRedis['store'], name: string) =>
  store.keys.events(name).replace(/:e:(?=[^:]*$)/, ':k:');

const sizeOf = (args: readonly string[]) => args.reduce((n, a) => n + Buffer.byteLength(a), 0);

describe('the Redis caller table', () => {
  it('writes only the delta after a table of 1,000 callers: c, the script arguments and the message stay small', async () => {
    const prefix = `t-${randomUUID()}:`;
    const { store } = await open(prefix);
    await store.apply(
      'wide',
      setCallers('wide', () => table(1_000)),
    );
    const messages: string[] = [];
    const listener = raw.duplicate();
    await listener.connect();
    await listener.subscribe(store.channel, (m) => messages.push(m));
    const evals = vi.spyOn(store.redis, 'eval');
    // One caller seen for the first time: the least recently seen one goes (the bound is 1,000).
    await store.apply(
      'wide',
      setCallers('wide', (t) => [...t.slice(1), entry(1_000)], T0 + 1),
    );
    const argv = evals.mock.calls.map(([, keys, args]) => sizeOf(keys) + sizeOf(args));
    evals.mockRestore();
    await until(async () => messages.length === 1, 'the message of the write');
    await listener.unsubscribe();
    listener.destroy();
    const circuitKey = store.keys.circuit('wide');
    const stored = (await raw.hGet(circuitKey, 'c')) ?? '';
    console.log(
      `a write after 1,000 callers: script arguments ${argv.join(', ')} B, message ${Buffer.byteLength(messages[0]!)} B, c ${stored.length} B`,
    );
    expect(argv).toHaveLength(1);
    expect(argv[0]).toBeLessThan(3_000); // the circuit (about 1 KB), one caller gone, one appended
    expect(Buffer.byteLength(messages[0]!)).toBeLessThan(3_000);
    expect(stored).not.toContain('callers');
    expect(stored.length).toBeLessThan(2_000);
    expect(await raw.hLen(callersKey(store, 'wide'))).toBe(1_000);
    // Another host reads the whole table, in recency order.
    const other = await open(prefix);
    expect((await other.store.find('wide'))?.callers).toEqual([...table(1_000).slice(1), entry(1_000)]);
  });

  it("keeps a second host's copy equal to the writer's through a series of deltas, and reads again after a missed message", async () => {
    const prefix = `t-${randomUUID()}:`;
    const writer = (await open(prefix)).store;
    const reader = (await open(prefix)).store;
    await writer.apply(
      'series',
      setCallers('series', () => table(5)),
    );
    await reader.find('series'); // the reader holds it from now on, kept current by the messages
    const steps: ((t: readonly CallerEntry[]) => readonly CallerEntry[])[] = [
      (t) => [...t, entry(5)], // appended
      (t) => t.map((e) => (e[0] === callerId(2) ? entry(2, 7, T0 + 2) : e)), // changed in place
      (t) => [...t.filter((e) => e[0] !== callerId(1)), entry(1, 2, T0 + 3)], // seen again: moves to the end
      (t) => t.filter((e) => e[0] !== callerId(0) && e[0] !== callerId(4)), // gone
      () => [], // emptied
      () => [entry(9), entry(8)],
    ];
    for (const [i, step] of steps.entries()) {
      const written = await writer.apply('series', setCallers('series', step, T0 + 10 + i));
      await until(async () => reader.peek('series')?.updatedAt === T0 + 10 + i, `the reader at step ${i}`);
      expect(reader.peek('series')?.callers ?? []).toEqual(written!.circuit.callers ?? []);
    }
    // A write whose message the reader misses (published elsewhere), then one it sees: it cannot
    // apply the second delta (made from a state it does not hold), drops its copy and reads again.
    const lost = (await open(prefix)).store;
    await lost.find('series');
    (lost as unknown as { cas: { publish: () => string[] } }).cas.publish = () => ['PUBLISH', 'nowhere'];
    await lost.apply(
      'series',
      setCallers('series', (t) => [...t, entry(20)], T0 + 100),
    );
    const last = await writer.apply(
      'series',
      setCallers('series', (t) => [...t, entry(21)], T0 + 101),
    );
    await until(async () => reader.peek('series') === undefined, 'the reader to drop its copy');
    const reread = await reader.find('series');
    expect(reread?.callers).toEqual([entry(9), entry(8), entry(20), entry(21)]);
    expect(reread?.callers).toEqual(last!.circuit.callers);
  });

  it("keeps each entry's voter (issue 30) through a delta, for another host and for a fresh read", async () => {
    const prefix = `t-${randomUUID()}:`;
    const writer = (await open(prefix)).store;
    const reader = (await open(prefix)).store;
    const voted = (i: number, voter: string): CallerEntry => [callerId(i), 1, T0, null, null, 0, null, voter];
    await writer.apply(
      'voters',
      setCallers('voters', () => [voted(0, 'm'), entry(1)]),
    );
    await reader.find('voters');
    const written = await writer.apply(
      'voters',
      setCallers('voters', (t) => [voted(0, 'n'), t[1]!, voted(2, 'm')], T0 + 1),
    );
    await until(async () => reader.peek('voters')?.updatedAt === T0 + 1, 'the reader to apply the delta');
    expect(reader.peek('voters')?.callers).toEqual([voted(0, 'n'), entry(1), voted(2, 'm')]);
    expect(written!.circuit.callers).toEqual(reader.peek('voters')?.callers);
    const fresh = (await open(prefix)).store;
    expect((await fresh.find('voters'))?.callers).toEqual([voted(0, 'n'), entry(1), voted(2, 'm')]);
    expect((await fresh.find('voters'))?.callers?.[1]).toHaveLength(7);
  });

  it('reads a circuit stored with its caller table inside c, and its next write moves the table into the hash', async () => {
    const prefix = `t-${randomUUID()}:`;
    const { store } = await open(prefix);
    const keys = store.keys.of('legacy');
    const legacy = { ...newCircuit('legacy', settings, T0), id: 16, callers: table(3) };
    await raw.set(keys.version, '5');
    await raw.hSet(keys.circuit('legacy'), { v: '5', id: '16', c: JSON.stringify(legacy) });
    expect((await store.find('legacy'))?.callers).toEqual(table(3));
    await store.apply(
      'legacy',
      setCallers('legacy', (t) => t.map((e, i) => (i === 1 ? entry(1, 4) : e)), T0 + 1),
    );
    expect(await raw.hGet(keys.circuit('legacy'), 'c')).not.toContain('callers');
    expect(await raw.hLen(callersKey(store, 'legacy'))).toBe(3);
    const other = await open(prefix);
    expect((await other.store.find('legacy'))?.callers).toEqual([entry(0), entry(1, 4), entry(2)]);
    // A host of an older build writes the table into c again: c's table is the truth, not the stale hash.
    await raw.hSet(keys.circuit('legacy'), {
      v: String(await raw.incr(keys.version)),
      c: JSON.stringify({ ...legacy, callers: [entry(5)] }),
    });
    const late = await open(prefix);
    expect((await late.store.find('legacy'))?.callers).toEqual([entry(5)]);
    await late.store.apply(
      'legacy',
      setCallers('legacy', (t) => [...t, entry(6)], T0 + 2),
    );
    expect(await raw.hGet(keys.circuit('legacy'), 'c')).not.toContain('callers');
    expect((await (await open(prefix)).store.find('legacy'))?.callers).toEqual([entry(5), entry(6)]);
  });

  it('removes the caller table with its circuit: DELETE and idle deletion', async () => {
    const prefix = `t-${randomUUID()}:`;
    const { store } = await open(prefix);
    await store.apply(
      'deleted',
      setCallers('deleted', () => table(3)),
    );
    await store.apply(
      'idle',
      setCallers('idle', () => table(3)),
    );
    const isolated: CallerEntry = [callerId(7), 1, T0, null, T0 + 60_000, 60, null];
    await store.apply(
      'isolating',
      setCallers('isolating', () => [isolated]),
    );
    for (const name of ['deleted', 'idle', 'isolating']) expect(await raw.exists(callersKey(store, name))).toBe(1);
    expect(await store.delete('deleted')).toBe(true);
    expect(await raw.exists(callersKey(store, 'deleted'))).toBe(0);
    // Idle deletion judges a circuit with its table: an isolated caller keeps its circuit.
    const progress = await new RedisHousekeeping(store).deleteIdle(T0 + 1, T0 + 1, () => false, 0, 100);
    expect(progress.deleted).toEqual(['idle']);
    expect(await raw.exists(callersKey(store, 'idle'))).toBe(0);
    expect(await raw.exists(store.keys.circuit('idle'))).toBe(0);
    expect(await raw.hLen(callersKey(store, 'isolating'))).toBe(1);
  });

  it("keeps another host's state-gauge mirror counting the isolated callers of changes whose deltas it cannot apply", async () => {
    const prefix = `t-${randomUUID()}:`;
    const writer = (await open(prefix)).store;
    const watcher = await open(prefix);
    const mirror = await watcher.mirror(10);
    const isolatedUntil = T0 + 60_000;
    const isolate = (i: number): CallerEntry => [callerId(i), 3, T0, null, isolatedUntil, 60, null];
    const gauge = () => mirror.first(10, T0).find((c) => c.name === 'gauged')?.isolatedCallers;
    await writer.apply(
      'gauged',
      setCallers('gauged', () => [entry(0), entry(1)]),
    );
    await until(async () => gauge() === 0, 'the mirror to hold the circuit');
    // The watcher never read the circuit: its cache holds no state a delta was made from.
    for (let i = 0; i < 3; i++) {
      await writer.apply(
        'gauged',
        setCallers('gauged', (t) => [...t.filter((e) => e[0] !== callerId(i)), isolate(i)]),
      );
      await until(async () => gauge() === i + 1, `${i + 1} isolated callers on the mirror`);
    }
    expect(mirror.first(10, T0).find((c) => c.name === 'gauged')?.circuit.callers).toEqual(
      (await writer.find('gauged'))?.callers,
    );
  });
});
