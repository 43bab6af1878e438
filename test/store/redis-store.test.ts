import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCircuit, recordFailure, type Circuit } from '../../src/domain/circuit.js';
import { isPromise } from '../../src/store/maybe-promise.js';
import { RedisKeys } from '../../src/store/redis/redis-keys.js';
import { CircuitMirror } from '../../src/store/redis/circuit-mirror.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { silentLogger } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';

const settings = { failureThreshold: 1_000, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
let redis: RedisServer;
const opened: OpenedRedis[] = [];

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await Promise.all(opened.map((o) => o.close()));
  await redis.stop();
});

async function open(prefix: string, db = 0, timeoutMs?: number): Promise<OpenedRedis> {
  const o = await openRedisStore({ url: redis.url(db), logger: silentLogger, prefix, timeoutMs });
  opened.push(o);
  return o;
}

const failure =
  (name: string, now = 1_000) =>
  (c: Circuit | null) =>
    recordFailure(c ?? newCircuit(name, settings, now), now);

/** Wait (bounded) until `read` gives `expected`; the value is what is asserted, not the time. */
async function eventually<T>(read: () => T, expected: T): Promise<T> {
  for (let i = 0; i < 500 && read() !== expected; i++) await new Promise((r) => setTimeout(r, 10));
  return read();
}

describe('RedisCircuitStore', () => {
  it('counts every one of 64 concurrent writers to one circuit, each on its own connection, without an error', async () => {
    const prefix = `t-${randomUUID()}:`;
    const hosts = await Promise.all(Array.from({ length: 64 }, () => open(prefix)));
    const results = await Promise.allSettled(hosts.map((h) => h.store.apply('shared', failure('shared'))));
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    const fresh = await open(prefix); // an empty cache: this read goes to Redis
    expect((await fresh.store.find('shared'))?.failureCount).toBe(64);
    expect(
      new Set(results.map((r) => (r as PromiseFulfilledResult<{ circuit: Circuit }>).value.circuit.failureCount)).size,
    ).toBe(64);
  });

  it('queues 500 concurrent writes of one process to one circuit and writes them in a few compare-and-sets', async () => {
    const { store } = await open(`t-${randomUUID()}:`);
    const results = await Promise.all(Array.from({ length: 500 }, () => store.apply('busy', failure('busy'))));
    expect(results.map((r) => r!.circuit.failureCount).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 500 }, (_, i) => i + 1),
    );
    expect(results.every((r) => r!.circuit.id === results[0]!.circuit.id && r!.circuit.id > 0)).toBe(true);
  });

  it('answers a read of a circuit it holds from memory, and sees a write made through another connection', async () => {
    const prefix = `t-${randomUUID()}:`;
    const [a, b] = [await open(prefix), await open(prefix)];
    await a.store.apply('seen', failure('seen'));
    expect(isPromise(b.store.find('seen'))).toBe(true); // first read: a round trip
    expect((await b.store.find('seen'))?.failureCount).toBe(1);
    const cached = b.store.find('seen');
    expect(isPromise(cached)).toBe(false);
    // A step that writes nothing (a check on a closed circuit) is answered synchronously too.
    const unchanged = (c: Circuit | null) => (c === null ? null : { circuit: c, transitions: [] });
    expect(isPromise(b.store.apply('seen', unchanged))).toBe(false);
    await a.store.apply('seen', failure('seen'));
    const seen = await eventually(() => (b.store.find('seen') as Circuit | null)?.failureCount, 2);
    expect(seen).toBe(2);
    expect(isPromise(b.store.find('seen'))).toBe(false);
  });

  it('keeps databases apart: the /db of the URL is honoured', async () => {
    const prefix = `t-${randomUUID()}:`;
    const [one, two] = [await open(prefix, 1), await open(prefix, 2)];
    await one.store.apply('apart', failure('apart'));
    expect(await two.store.find('apart')).toBeNull();
    expect((await one.store.find('apart'))?.failureCount).toBe(1);
  });

  it('never reuses a version: a circuit deleted on one host and created again is seen new on another', async () => {
    const prefix = `t-${randomUUID()}:`;
    const [a, b] = [await open(prefix), await open(prefix)];
    await a.store.apply('again', failure('again'));
    await a.store.apply('again', failure('again'));
    expect((await b.store.find('again'))?.failureCount).toBe(2);
    expect(await a.store.delete('again')).toBe(true);
    expect(await eventually(() => b.store.find('again'), null)).toBeNull();
    const created = await b.store.apply('again', failure('again'));
    expect(created?.circuit.failureCount).toBe(1);
    expect(await eventually(() => (a.store.find('again') as Circuit | null)?.failureCount, 1)).toBe(1);
    expect(await a.store.delete('nobody')).toBe(false);
  });

  it('keeps transitions per circuit, newest first, and removes them with the circuit', async () => {
    const { store } = await open(`t-${randomUUID()}:`);
    const trip = (c: Circuit | null) =>
      recordFailure(c ?? newCircuit('ev', { ...settings, failureThreshold: 1 }, 1_000), 1_000);
    const step = await store.apply('ev', trip);
    const id = step!.circuit.id;
    expect(await store.events(id, 10)).toEqual([
      { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: 1_000 },
    ]);
    expect((await store.list({ limit: 10, state: 'open', now: 1_000 })).map((c) => c.name)).toEqual(['ev']);
    expect((await store.list({ limit: 10, state: 'half_open', now: 1_000 + 31_000 })).map((c) => c.name)).toEqual([
      'ev',
    ]);
    expect(await store.delete('ev')).toBe(true);
    expect(await store.events(id, 10)).toEqual([]);
    expect(await store.list({ limit: 10 })).toEqual([]);
  });

  it('feeds every host the transitions of all hosts, numbered in order, from the shared stream', async () => {
    const prefix = `t-${randomUUID()}:`;
    const [a, b] = [await open(prefix), await open(prefix)];
    const trip = (name: string) => (c: Circuit | null) =>
      recordFailure(c ?? newCircuit(name, { ...settings, failureThreshold: 1 }, 1_000), 1_000);
    await a.store.apply('one', trip('one'));
    await b.store.apply('two', trip('two'));
    for (let i = 0; i < 500 && b.feed.maxId() < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(b.feed.after(0, 10).map((t) => [t.id, t.circuit, t.to])).toEqual([
      [1, 'one', 'open'],
      [2, 'two', 'open'],
    ]);
    expect(b.feed.after(1, 10, { prefix: 'tw' }).map((t) => t.circuit)).toEqual(['two']);
    const late = await open(prefix); // a host started later loads what is already there
    expect(late.feed.after(0, 10).map((t) => t.id)).toEqual([1, 2]);
  });

  it('mirrors every circuit of every host for the state gauges, kept current by the changes', async () => {
    const prefix = `t-${randomUUID()}:`;
    const [a, b] = [await open(prefix), await open(prefix)];
    const trip = (name: string) => (c: Circuit | null) =>
      recordFailure(c ?? newCircuit(name, { ...settings, failureThreshold: 1 }, 1_000), 1_000);
    await a.store.apply('x', failure('x'));
    await a.store.apply('y', trip('y'));
    const mirror = new CircuitMirror(b.store);
    await mirror.load();
    expect(mirror.stateCounts(1_000)).toEqual({ closed: 1, open: 1, half_open: 0 });
    expect(mirror.stateCounts(1_000 + 31_000)).toEqual({ closed: 1, open: 0, half_open: 1 });
    expect(mirror.first(1, 1_000).map((c) => [c.name, c.state, c.circuit.failureCount])).toEqual([['x', 'closed', 1]]);
    await a.store.apply('x', failure('x'));
    await a.store.delete('y');
    const settled = () =>
      mirror
        .first(10, 1_000)
        .map((c) => `${c.name}:${c.circuit.failureCount}`)
        .join();
    for (let i = 0; i < 500 && settled() !== 'x:2'; i++) await new Promise((r) => setTimeout(r, 10));
    expect(settled()).toBe('x:2');
    expect(mirror.stateCounts(1_000)).toEqual({ closed: 1, open: 0, half_open: 0 });
  });

  it('reloads the mirror into a fresh copy: circuits deleted or changed while its messages were missed do not linger', async () => {
    const prefix = `t-${randomUUID()}:`;
    const a = await open(prefix);
    await a.store.apply('kept', failure('kept'));
    await a.store.apply('gone', failure('gone'));
    const mirror = new CircuitMirror(a.store);
    await mirror.load();
    expect(mirror.stateCounts(1_000)).toEqual({ closed: 2, open: 0, half_open: 0 });
    // Changes this mirror never heard of (as while its subscription was down): keys changed directly.
    const other = await open(prefix);
    const opened = { ...(await other.store.find('kept'))!, state: 'open', openUntil: 31_000, openTimeoutSeconds: 30 };
    const raw = other.store.redis;
    const keys = new RedisKeys(prefix);
    await raw.command(['HSET', keys.circuit('kept'), 'v', '999999', 'c', JSON.stringify(opened)]);
    await raw.command(['DEL', keys.circuit('gone')]);
    await raw.command(['ZREM', keys.of('gone').index, 'gone']);
    await mirror.load();
    expect(mirror.stateCounts(1_000)).toEqual({ closed: 0, open: 1, half_open: 0 });
    expect(mirror.first(10, 1_000).map((c) => c.name)).toEqual(['kept']);
  });

  it('finds the circuits due to half-open from the due set, reading no circuit, and keeps the set to the open ones', async () => {
    const { store } = await open(`t-${randomUUID()}:`);
    const quick = { failureThreshold: 1, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
    const trip = (name: string, now: number) => (c: Circuit | null) =>
      recordFailure(c ?? newCircuit(name, quick, now), now);
    for (let i = 0; i < 300; i++) await store.apply(`closed-${i}`, failure(`closed-${i}`));
    await store.apply('later', trip('later', 2_000));
    await store.apply('sooner', trip('sooner', 1_000));
    const reads = () => {
      const stats = execFileSync('redis-cli', ['-p', String(redis.port), 'INFO', 'commandstats'], { encoding: 'utf8' });
      return [...stats.matchAll(/^cmdstat_(hget|hmget|hgetall|zrange|zrangebyscore|scan):calls=(\d+)/gm)].reduce(
        (n, m) => (m[1]!.startsWith('h') || m[1] === 'scan' ? n + Number(m[2]) : n),
        0,
      );
    };
    const before = reads();
    expect(await store.dueOpen(30_999, 10)).toEqual([]);
    expect(await store.dueOpen(31_000, 10)).toEqual(['sooner']);
    expect(await store.dueOpen(40_000, 10)).toEqual(['sooner', 'later']); // earliest open_until first
    expect(await store.dueOpen(40_000, 1)).toEqual(['sooner']);
    expect(reads() - before).toBe(0); // no circuit read: the old scan read all 302
    await store.apply('sooner', (c) => ({
      circuit: { ...c!, state: 'closed' as const, openUntil: null },
      transitions: [],
    })); // no longer open: leaves the set
    await store.delete('later');
    expect(await store.dueOpen(40_000, 10)).toEqual([]);
  });

  it('answers 503 STORAGE_UNAVAILABLE within its timeout while Redis is frozen, and works again after', async () => {
    const own = await startRedis();
    const o = await openRedisStore({ url: own.url(), logger: silentLogger, timeoutMs: 300 });
    try {
      await o.store.apply('frozen', failure('frozen'));
      own.child.kill('SIGSTOP');
      await expect(o.store.apply('frozen', failure('frozen'))).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
      await expect(o.store.ping()).resolves.toBe(false);
      own.child.kill('SIGCONT');
      const after = await o.store.apply('frozen', failure('frozen'));
      // The write answered 503 ran once Redis woke up: a 503 may still have been applied.
      expect(after?.circuit.failureCount).toBe(3);
    } finally {
      await o.close();
      await own.stop();
    }
  });
});
