// Issue 31 on Redis: a circuit's outcome history is a capped stream in the circuit's slot
// (`h:<name>`), appended by the compare-and-set script in the same atomic run as the circuit.
import { randomUUID } from 'node:crypto';
import { createClient } from '@redis/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCircuit, recordOutcome, type Circuit, type Step } from '../../src/domain/circuit.js';
import { decodeEntry, type HistoryHook, type StoredEntry } from '../../src/domain/history.js';
import { isPromise } from '../../src/store/maybe-promise.js';
import { historySettings } from '../../src/store/redis/history-stream.js';
import type { HistoryOptions } from '../../src/store/redis/redis-store-options.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { RedisHousekeeping } from '../../src/store/redis/redis-housekeeping.js';
import { silentLogger } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';

const T0 = 1_700_000_000_000;
const settings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
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

async function open(prefix = `t-${randomUUID()}:`, history?: HistoryOptions): Promise<OpenedRedis> {
  const o = await openRedisStore({ url: redis.url(), logger: silentLogger, prefix, history });
  opened.push(o);
  return o;
}

/** An outcome at `now` (created with the test settings when absent), and its hook, as the service passes them. */
function outcome(name: string, now: number, success: boolean, caller?: string) {
  const o = { success, ...(caller === undefined ? {} : { caller }) };
  const step = (c: Circuit | null): Step => recordOutcome(c ?? newCircuit(name, settings, now), o, now);
  const hook: HistoryHook = () => ({ type: 'outcome', t: now, outcome: o });
  return [step, hook] as const;
}

/** A step that leaves the circuit as it is (an outcome that changes nothing), with its outcome hook. */
function unchanged(now: number, caller: string) {
  const step = (c: Circuit | null): Step | null => (c === null ? null : { circuit: c, transitions: [] });
  const hook: HistoryHook = () => ({ type: 'outcome', t: now, outcome: { success: true, caller } });
  return [step, hook] as const;
}

const decoded = (entries: readonly StoredEntry[] | null) => (entries ?? []).map((e) => decodeEntry(e.t, e.text));
const callersOf = (entries: readonly StoredEntry[] | null) =>
  decoded(entries).flatMap((e) => (e?.type === 'outcome' ? [e.outcome.caller] : []));

describe('the Redis outcome history', () => {
  it('takes history.enabled, max_outcomes and max_age_hours with their defaults, as whole numbers', () => {
    expect(historySettings(undefined)).toEqual({ enabled: true, maxOutcomes: 200_000, maxAgeMs: 168 * 3_600_000 });
    expect(historySettings({ enabled: false, maxOutcomes: 100.7, maxAgeHours: 0.5 })).toEqual({
      enabled: false,
      maxOutcomes: 100,
      maxAgeMs: 1_800_000,
    });
    expect(historySettings({ maxOutcomes: 0, maxAgeHours: Number.POSITIVE_INFINITY })).toEqual({
      enabled: true,
      maxOutcomes: 1,
      maxAgeMs: 0,
    });
  });

  it('writes the outcome, then the transitions it made, with the circuit', async () => {
    const { store } = await open();
    for (let i = 0; i < 3; i++) await store.apply('svc', ...outcome('svc', T0 + i, false));
    const entries = await store.history('svc', { limit: 100 });
    expect(decoded(entries)).toEqual([
      { type: 'outcome', t: T0, outcome: { success: false } },
      { type: 'outcome', t: T0 + 1, outcome: { success: false } },
      { type: 'outcome', t: T0 + 2, outcome: { success: false } },
      {
        type: 'transition',
        t: T0 + 2,
        transition: { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: T0 + 2 },
      },
    ]);
    expect((await store.find('svc'))?.state).toBe('open');
  });

  it('writes an outcome that leaves the circuit unchanged, through Redis, and keeps the circuit version', async () => {
    const { store } = await open();
    await store.apply('calm', ...outcome('calm', T0, true, 'a'));
    const key = store.keys.circuit('calm');
    const version = await raw.hGet(key, 'v');
    const answer = store.apply('calm', ...unchanged(T0 + 1, 'b'));
    expect(isPromise(answer)).toBe(true); // not answered from the cache: the entry must be durable first
    await answer;
    expect(callersOf(await store.history('calm', { limit: 10 }))).toEqual(['a', 'b']);
    expect(await raw.hGet(key, 'v')).toBe(version); // the circuit itself was not rewritten
    // Without a history entry the same step still answers at once and writes nothing.
    expect(isPromise(store.apply('calm', unchanged(T0 + 2, 'c')[0]))).toBe(false);
    expect(callersOf(await store.history('calm', { limit: 10 }))).toEqual(['a', 'b']);
  });

  it('appends a losing write entry once: not at its lost attempt, once at its retry', async () => {
    const { store } = await open();
    await store.apply('race', ...outcome('race', T0, true, 'first'));
    // Another writer commits behind this host's cache (no message reaches it): the cached version is stale.
    await raw.hIncrBy(store.keys.circuit('race'), 'v', 1);
    let attempts = 0;
    const [step, hook] = unchanged(T0 + 1, 'loser');
    await store.apply('race', step, (before, result) => {
      attempts++;
      return hook(before, result);
    });
    expect(attempts).toBe(3); // the cache check, the attempt that lost, the retry that won
    expect(callersOf(await store.history('race', { limit: 10 }))).toEqual(['first', 'loser']);
  });

  it('keeps every one of 64 concurrent writers on their own connections exactly once, in commit order', async () => {
    const prefix = `t-${randomUUID()}:`;
    const hosts = await Promise.all(Array.from({ length: 64 }, () => open(prefix)));
    let calls = 0;
    await Promise.all(
      hosts.map((h, i) => {
        const [step, hook] = outcome('shared', T0, false, `host-${i}`);
        return h.store.apply('shared', step, (b, r) => {
          calls++;
          return hook(b, r);
        });
      }),
    );
    expect(calls).toBeGreaterThan(64); // compare-and-sets lost and were retried
    const entries = decoded(await hosts[0]!.store.history('shared', { limit: 1_000 }));
    const callers = entries.flatMap((e) => (e?.type === 'outcome' ? [e.outcome.caller] : []));
    expect([...callers].sort()).toEqual(Array.from({ length: 64 }, (_, i) => `host-${i}`).sort());
    // Opened once, at the third failure in write order: the transition entry follows the third outcome.
    expect(entries.findIndex((e) => e?.type === 'transition')).toBe(3);
    expect(entries).toHaveLength(65);
  });

  it('writes the entries of a batch with its circuits, unchanged ones included', async () => {
    const { store } = await open();
    await store.apply('b1', ...outcome('b1', T0, true, 'x'));
    const [s1, h1] = outcome('b1', T0 + 1, false, 'y');
    const [s2, h2] = unchanged(T0 + 2, 'z');
    const [s3, h3] = outcome('b2', T0 + 3, false, 'w');
    await store.applyBatch([
      { name: 'b1', step: s1, history: h1 },
      { name: 'b1', step: s2, history: h2 },
      { name: 'b2', step: s3, history: h3 },
    ]);
    expect(callersOf(await store.history('b1', { limit: 10 }))).toEqual(['x', 'y', 'z']);
    expect(callersOf(await store.history('b2', { limit: 10 }))).toEqual(['w']);
  });

  it('reads entries oldest first, from (inclusive) to (exclusive) by t, at most limit', async () => {
    const { store } = await open();
    for (let i = 0; i < 10; i++) await store.apply('range', ...outcome('range', T0 + i * 1_000, true, `c${i}`));
    expect(callersOf(await store.history('range', { limit: 100 }))).toEqual(
      Array.from({ length: 10 }, (_, i) => `c${i}`),
    );
    expect(callersOf(await store.history('range', { from: T0 + 2_000, to: T0 + 5_000, limit: 100 }))).toEqual([
      'c2',
      'c3',
      'c4',
    ]);
    expect(callersOf(await store.history('range', { from: T0 + 2_000, limit: 2 }))).toEqual(['c2', 'c3']);
    expect((await store.history('range', { limit: 100 }))!.map((e) => e.t)).toEqual(
      Array.from({ length: 10 }, (_, i) => T0 + i * 1_000),
    );
    expect(await store.history('nobody', { limit: 10 })).toBeNull();
  });

  it('keeps an entry whose t is behind the newest (another host clock) after it, with its own t', async () => {
    const { store } = await open();
    await store.apply('skew', ...outcome('skew', T0 + 5_000, true, 'ahead'));
    await store.apply('skew', ...outcome('skew', T0, true, 'behind'));
    const entries = await store.history('skew', { limit: 10 });
    expect(callersOf(entries)).toEqual(['ahead', 'behind']);
    expect(entries!.map((e) => e.t)).toEqual([T0 + 5_000, T0]);
  });

  it('deletes the history with its circuit, and a circuit created again starts a new one', async () => {
    const { store } = await open();
    await store.apply('gone', ...outcome('gone', T0, false, 'old'));
    expect(await raw.exists(store.keys.history('gone'))).toBe(1);
    expect(await store.delete('gone')).toBe(true);
    expect(await raw.exists(store.keys.history('gone'))).toBe(0);
    expect(await store.history('gone', { limit: 10 })).toBeNull();
    await store.apply('gone', ...outcome('gone', T0 + 1, false, 'new'));
    expect(callersOf(await store.history('gone', { limit: 10 }))).toEqual(['new']);
  });

  it('drops a stream left behind by a build that did not delete it when the circuit is created again', async () => {
    const { store } = await open();
    await raw.xAdd(store.keys.history('orphan'), `${T0}-*`, { t: String(T0), e: '[1,null,"stale"]' });
    await store.apply('orphan', ...outcome('orphan', T0 + 1, false, 'new'));
    expect(callersOf(await store.history('orphan', { limit: 10 }))).toEqual(['new']);
  });

  it('deletes the history of a circuit deleted as idle', async () => {
    const { store } = await open();
    await store.apply('idle', ...outcome('idle', T0, true, 'once'));
    const progress = await new RedisHousekeeping(store).deleteIdle(T0 + 60_000, T0 + 60_000, () => false, 0, 100);
    expect(progress.deleted).toEqual(['idle']);
    expect(await raw.exists(store.keys.history('idle'))).toBe(0);
  });

  it('keeps about max_outcomes entries per circuit, the newest', async () => {
    const { store } = await open(undefined, { maxOutcomes: 100 });
    for (let i = 0; i < 1_000; i++) await store.apply('bounded', ...unchangedOrCreate('bounded', T0 + i, i));
    const length = await raw.xLen(store.keys.history('bounded'));
    // `MAXLEN ~` drops whole stream nodes (stream-node-max-entries, 100 by default): at most one node more.
    expect(length).toBeGreaterThanOrEqual(100);
    expect(length).toBeLessThan(200);
    const entries = await store.history('bounded', { limit: 1_000 });
    expect(callersOf(entries).at(-1)).toBe('999');
    expect(entries!.map((e) => e.t)).toEqual(Array.from({ length }, (_, i) => T0 + 1_000 - length + i));
  });

  it('drops entries older than max_age_hours behind the newest', async () => {
    const { store } = await open(undefined, { maxAgeHours: 1 });
    for (let i = 0; i < 300; i++) await store.apply('aged', ...unchangedOrCreate('aged', T0 + i, i));
    await store.apply('aged', ...outcome('aged', T0 + 2 * 3_600_000, true, 'late'));
    const entries = await store.history('aged', { limit: 1_000 });
    // `MINID ~` drops whole nodes whose entries are all older: at most one node (100) of old ones is left.
    expect(entries!.length).toBeLessThanOrEqual(101);
    expect(callersOf(entries).at(-1)).toBe('late');
  });

  it('writes nothing with history.enabled false, and answers unchanged outcomes at once', async () => {
    const { store } = await open(undefined, { enabled: false });
    await store.apply('off', ...outcome('off', T0, false, 'a'));
    expect(isPromise(store.apply('off', ...unchanged(T0 + 1, 'b')))).toBe(false);
    expect(await store.history('off', { limit: 10 })).toEqual([]);
    expect(await raw.exists(store.keys.history('off'))).toBe(0);
  });

  it('writes nothing for a circuit whose policy says history false', async () => {
    const { store } = await open();
    const optOut =
      (now: number) =>
      (c: Circuit | null): Step => {
        const base = c ?? ({ ...newCircuit('quiet', settings, now), history: false } as Circuit);
        return recordOutcome(base, { success: false }, now);
      };
    const hook: HistoryHook = () => ({ type: 'outcome', t: T0, outcome: { success: false } });
    for (let i = 0; i < 3; i++) await store.apply('quiet', optOut(T0 + i), hook);
    expect((await store.find('quiet'))?.state).toBe('open');
    expect(await store.history('quiet', { limit: 10 })).toEqual([]);
  });
});

/** The first call creates the circuit, the rest change nothing; each with its outcome entry (caller = `i`). */
function unchangedOrCreate(name: string, now: number, i: number) {
  const [step, hook] = unchanged(now, String(i));
  const create = (c: Circuit | null): Step | null =>
    c === null ? { circuit: newCircuit(name, settings, now), transitions: [] } : step(c);
  return [create, hook] as const;
}
