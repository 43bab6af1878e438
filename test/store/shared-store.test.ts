import { describe, expect, it } from 'vitest';
import { newCircuit, recordFailure, recordSuccess, type Circuit, type Step } from '../../src/domain/circuit.js';
import type { CircuitStore } from '../../src/store/circuit-store.js';
import { openRedisStore } from '../../src/store/redis/open.js';
import { silentLogger } from '../helper.js';
import { everyStore } from './every-store.js';

/**
 * The `CircuitStore` port, one set of cases run against every store: SQLite on a temp file
 * and Redis on a redis-server of this file's own (random loopback port). What a store must
 * do is proved here once per store; the HTTP suites prove the routes (on SQLite).
 */
const settings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const T0 = 1_000_000;
const { stores, redisUrl, track } = everyStore();

/** Create the circuit (or leave it) with the test settings. */
const create =
  (name: string, now = T0) =>
  (c: Circuit | null): Step => ({ circuit: c ?? newCircuit(name, settings, now), transitions: [] });
const fail =
  (name: string, now = T0) =>
  (c: Circuit | null) =>
    recordFailure(c ?? newCircuit(name, settings, now), now);

/** Open `name` at `now` (threshold 3): its `openUntil` is `now + 30 s`. */
async function openAt(store: CircuitStore, name: string, now: number): Promise<Circuit> {
  for (let i = 0; i < 3; i++) await store.apply(name, fail(name, now));
  return (await store.find(name))!;
}

describe.each(stores)('CircuitStore (%s)', (_kind, makeStore) => {
  it('knows no circuit before it is written, and a step returning null writes nothing', async () => {
    const store = await makeStore();
    expect(await store.find('ghost')).toBeNull();
    expect(await store.apply('ghost', () => null)).toBeNull();
    expect(await store.find('ghost')).toBeNull();
    expect(await store.list({ limit: 10 })).toEqual([]);
    expect(await store.count?.()).toBe(0);
    expect(await store.ping()).toBe(true);
  });

  it('stores a new circuit under an id of its own, and answers it on the next read', async () => {
    const store = await makeStore();
    const written = await store.apply('svc', create('svc'));
    const other = await store.apply('other', create('other'));
    expect(written!.circuit.id).toBeGreaterThan(0);
    expect(other!.circuit.id).toBeGreaterThan(written!.circuit.id);
    expect(await store.find('svc')).toEqual(written!.circuit);
  });

  it('keeps every field of a circuit exactly: policy, window and throttle state, leases and times', async () => {
    const store = await makeStore();
    const full: Circuit = {
      ...newCircuit('full', settings, T0),
      state: 'half_open',
      failureCount: 2,
      successThreshold: 3,
      window: {
        type: 'count',
        size: 20,
        minimumCalls: 5,
        failureRateThreshold: 50,
        slowCallDurationMs: 250,
        slowCallRateThreshold: 80,
      },
      backoff: { multiplier: 2, maxTimeoutSeconds: 600 },
      forcedState: 'closed',
      windowState: { type: 'count', outcomes: 'ab', failures: 1, slowCalls: 1 },
      throttle: { k: 1.5, windowSeconds: 30 },
      throttleState: { type: 'time', buckets: [[T0 / 1000, 4, 3, 0]] },
      probeLeases: [T0 + 10_000, T0 + 20_000],
      probeSuccesses: 1,
      openUntil: T0 + 60_000,
      openTimeoutSeconds: 60,
      reopenCount: 2,
      halfOpenAt: T0 + 60_000,
      lastFailureAt: T0 + 5,
      stateChangedAt: T0 + 60_001,
      updatedAt: T0 + 60_002,
    };
    const { id } = (await store.apply('full', () => ({ circuit: full, transitions: [] })))!.circuit;
    expect(await store.find('full')).toEqual({ ...full, id });
    // The listings read the same fields (SQLite reads them as raw rows).
    expect(await store.list({ limit: 10 })).toEqual([{ ...full, id }]);
    expect(await store.list({ limit: 10, state: 'half_open', now: T0 })).toEqual([{ ...full, id }]);
  });

  it('keeps a quorum and its caller table exactly, and the detail members of a transition (issue 17)', async () => {
    const store = await makeStore();
    const circuit: Circuit = {
      ...newCircuit('shared', { ...settings, quorum: { minCallers: 2, windowSeconds: 60, maxCallers: 10 } }, T0),
      callers: [
        ['dc1/a', 3, T0, null, T0 + 30_000, 30, null],
        ['dc2/b', 0, T0 - 5, T0 - 5, null, 0, T0 + 10_000],
      ],
    };
    const withheld = {
      from: 'closed',
      to: 'closed',
      reason: 'trip_withheld',
      at: T0,
      rule: 'failure_threshold_reached',
      callers: ['dc1/a'],
      forcedState: 'closed',
    } as const;
    const isolated = {
      from: 'closed',
      to: 'closed',
      reason: 'caller_isolated',
      at: T0,
      callers: ['dc1/a'],
      until: T0 + 30_000,
    } as const;
    const { id } = (await store.apply('shared', () => ({ circuit, transitions: [isolated, withheld] })))!.circuit;
    expect(await store.find('shared')).toEqual({ ...circuit, id });
    expect(await store.events(id, 10)).toEqual([withheld, isolated]);
    const { quorum: _quorum, callers: _callers, ...without } = circuit;
    await store.apply('shared', (c) => ({ circuit: { ...without, id: c!.id, updatedAt: T0 + 1 }, transitions: [] }));
    const after = (await store.find('shared'))!;
    expect(after.quorum ?? null).toBeNull();
    expect(after.callers ?? []).toEqual([]);
  });

  it('writes nothing when a step returns the very circuit it was given', async () => {
    const store = await makeStore();
    const first = (await store.apply('svc', create('svc')))!.circuit;
    const same = await store.apply('svc', (c) => ({ circuit: c!, transitions: [] }));
    expect(same!.circuit).toEqual(first);
    expect(await store.events(first.id, 10)).toEqual([]);
    expect((await store.find('svc'))!.updatedAt).toBe(first.updatedAt);
  });

  it('writes a transition with the change that makes it, and answers events newest first', async () => {
    const store = await makeStore();
    const open = await openAt(store, 'svc', T0);
    expect(open.state).toBe('open');
    await store.apply('svc', (c) =>
      recordSuccess({ ...c!, state: 'half_open', openUntil: null, halfOpenAt: T0 + 30_000 }, T0 + 31_000),
    );
    const events = await store.events(open.id, 10);
    expect(events.map((e) => [e.from, e.to, e.reason])).toEqual([
      ['half_open', 'closed', 'probe_succeeded'],
      ['closed', 'open', 'failure_threshold_reached'],
    ]);
    expect(events[1]!.at).toBe(T0);
    expect(await store.events(open.id, 1)).toEqual([events[0]]);
  });

  it('applies a batch in order in one write: a circuit created by one step is seen by the next', async () => {
    const store = await makeStore();
    const results = await store.applyBatch([
      { name: 'a', step: fail('a') },
      { name: 'b', step: create('b') },
      { name: 'a', step: fail('a') },
      { name: 'a', step: (c) => (c === null ? null : { circuit: c, transitions: [] }) },
    ]);
    expect(results.map((r) => r?.circuit.failureCount)).toEqual([1, 0, 2, 2]);
    expect((await store.find('a'))!.failureCount).toBe(2);
    expect((await store.find('b'))!.id).toBeGreaterThan(0);
    expect(await store.count?.()).toBe(2);
  });

  it('writes nothing of a batch whose step throws', async () => {
    const store = await makeStore();
    await store.apply('kept', create('kept'));
    const batch = () =>
      store.applyBatch([
        { name: 'kept', step: fail('kept') },
        { name: 'new', step: create('new') },
        {
          name: 'kept',
          step: () => {
            throw new Error('refused');
          },
        },
      ]);
    await expect(Promise.resolve().then(batch)).rejects.toThrow('refused'); // SQLite throws, Redis rejects
    expect((await store.find('kept'))!.failureCount).toBe(0);
    expect(await store.find('new')).toBeNull();
    expect(await store.count?.()).toBe(1);
  });

  it('counts every one of concurrent writes to one circuit', async () => {
    const store = await makeStore();
    const results = await Promise.all(
      Array.from({ length: 40 }, () =>
        store.apply('busy', (c) => ({
          circuit: {
            ...(c ?? newCircuit('busy', { ...settings, failureThreshold: 1_000 }, T0)),
            failureCount: (c?.failureCount ?? 0) + 1,
          },
          transitions: [],
        })),
      ),
    );
    expect(results.map((r) => r!.circuit.failureCount).sort((x, y) => x - y)).toEqual(
      Array.from({ length: 40 }, (_, i) => i + 1),
    );
    expect((await store.find('busy'))!.failureCount).toBe(40);
  });

  it('deletes a circuit with its events once, and counts exactly through inserts and deletes', async () => {
    const store = await makeStore();
    const open = await openAt(store, 'gone', T0);
    await store.apply('stays', create('stays'));
    expect(await store.count?.()).toBe(2);
    expect(await store.delete('gone')).toBe(true);
    expect(await store.delete('gone')).toBe(false);
    expect(await store.find('gone')).toBeNull();
    expect(await store.events(open.id, 10)).toEqual([]);
    expect(await store.count?.()).toBe(1);
    const again = (await store.apply('gone', create('gone')))!.circuit;
    expect([again.failureCount, again.state]).toEqual([0, 'closed']);
    expect(await store.count?.()).toBe(2);
  });

  it('lists in id order in keyset pages, by state, an expired open circuit as half_open', async () => {
    const store = await makeStore();
    for (const name of ['c1', 'c2', 'c3', 'c4']) await store.apply(name, create(name));
    await openAt(store, 'c2', T0); // open until T0 + 30 s
    await openAt(store, 'c4', T0 + 20_000); // open until T0 + 50 s
    const first = await store.list({ limit: 2 });
    expect(first.map((c) => c.name)).toEqual(['c1', 'c2']);
    expect((await store.list({ limit: 2, afterId: first[1]!.id })).map((c) => c.name)).toEqual(['c3', 'c4']);
    expect((await store.list({ limit: 10, state: 'open' })).map((c) => c.name)).toEqual(['c2', 'c4']);
    expect((await store.list({ limit: 10, state: 'closed' })).map((c) => c.name)).toEqual(['c1', 'c3']);
    const later = T0 + 40_000; // c2's open time is over, c4's is not
    expect((await store.list({ limit: 10, state: 'open', now: later })).map((c) => c.name)).toEqual(['c4']);
    expect((await store.list({ limit: 10, state: 'half_open', now: later })).map((c) => c.name)).toEqual(['c2']);
  });

  it('names the open circuits that are due, earliest first, at most `limit`', async () => {
    const store = await makeStore();
    await openAt(store, 'late', T0 + 10_000); // due at T0 + 40 s
    await openAt(store, 'early', T0); // due at T0 + 30 s
    await openAt(store, 'not-yet', T0 + 60_000); // due at T0 + 90 s
    await store.apply('closed', create('closed'));
    expect(await store.dueOpen(T0 + 29_999, 10)).toEqual([]);
    expect(await store.dueOpen(T0 + 45_000, 10)).toEqual(['early', 'late']);
    expect(await store.dueOpen(T0 + 45_000, 1)).toEqual(['early']);
  });

  it.each(['a/b', 'svc%2Fx', 'with space', 'colon:star*', 'ünïcödé', '_%'])(
    'keeps the circuit named %s apart from every other',
    async (name) => {
      const store = await makeStore();
      await store.apply(name, fail(name));
      await store.apply('a', create('a'));
      expect((await store.find(name))!.failureCount).toBe(1);
      expect((await store.find('a'))!.failureCount).toBe(0);
      expect((await store.list({ limit: 10 })).map((c) => c.name)).toEqual([name, 'a']);
      expect(await store.delete(name)).toBe(true);
      expect((await store.list({ limit: 10 })).map((c) => c.name)).toEqual(['a']);
    },
  );

  it('peeks, without waiting, only at what `find` would answer', async () => {
    const store = await makeStore();
    const written = (await store.apply('svc', fail('svc')))!.circuit;
    const peeked = store.peek('svc');
    // SQLite always has it at hand; Redis from the cache of this host's own write.
    expect(peeked).toEqual(written);
    expect(peeked).toEqual(await store.find('svc'));
  });
});

describe('CircuitStore.peek', () => {
  it('answers null at once on SQLite for an unknown circuit', async () => {
    const store = await stores[0]![1]();
    expect(store.peek('ghost')).toBeNull();
  });

  it('answers undefined on Redis for a circuit this host has not read (a round trip is needed)', async () => {
    const writer = await stores[1]![1]();
    const prefix = (writer as unknown as { keys: { prefix: string } }).keys.prefix;
    await writer.apply('svc', fail('svc'));
    const o = track(await openRedisStore({ url: redisUrl(), logger: silentLogger, prefix }));
    expect(o.store.peek('svc')).toBeUndefined();
    expect((await o.store.find('svc'))!.failureCount).toBe(1);
    expect(o.store.peek('svc')).toEqual(await o.store.find('svc'));
  });
});
