import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCircuit, recordFailure } from '../../src/domain/circuit.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { SHARDS } from '../../src/store/redis/shards.js';
import { silentLogger } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';

let redis: RedisServer;
const opened: OpenedRedis[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await Promise.all(opened.map((o) => o.close()));
  await redis.stop('SIGKILL');
});
/**
 * Each command may take 10 s, not the default 1 s: on a busy machine Redis can stall past a
 * second under this file's 20,000-circuit writes, and what is tested is the start deadline.
 */
const COMMAND_TIMEOUT_MS = 10_000;
const open = async (prefix: string) => {
  const o = await openRedisStore({ url: redis.url(), logger: silentLogger, prefix, timeoutMs: COMMAND_TIMEOUT_MS });
  opened.push(o);
  return o;
};

describe('a store of the layout before shards', () => {
  it('is moved into the shards at start (state, version, events, due, id order kept), once, and a second start changes nothing', async () => {
    const prefix = `t-${randomUUID()}:`;
    const settings = { failureThreshold: 1, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
    const scratch = await open(`${prefix}scratch:`);
    const raw = scratch.store.redis;
    // The old keys as circuitlog wrote them: c:{name}, e:{name}, index, due under the prefix.
    const names = ['old-a', 'old-b', 'old-c'];
    for (const [i, name] of names.entries()) {
      const step = recordFailure(newCircuit(name, settings, 1_000), 1_000); // opens it (threshold 1)
      const circuit = { ...step.circuit, id: i + 1 };
      await raw.command([
        'HSET',
        `${prefix}c:{${name}}`,
        'v',
        String(100 + i),
        'id',
        String(i + 1),
        'c',
        JSON.stringify(circuit),
      ]);
      await raw.command([
        'LPUSH',
        `${prefix}e:{${name}}`,
        JSON.stringify(['closed', 'open', 'failure_threshold_reached', 1_000]),
      ]);
      await raw.command(['ZADD', `${prefix}index`, String(i + 1), name]);
      await raw.command(['ZADD', `${prefix}due`, String(circuit.openUntil), name]);
    }
    const host = await open(prefix);
    const listed = await host.store.list({ limit: 10 });
    expect(listed.map((c) => c.name)).toEqual(names); // the old id order
    for (const [i, c] of listed.entries()) {
      expect(c).toMatchObject({ state: 'open', failureCount: 1 });
      expect(Math.floor(c.id / SHARDS)).toBe(i + 1);
      expect(await host.store.events(c.id, 10)).toEqual([
        { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: 1_000 },
      ]);
    }
    expect(await host.store.count()).toBe(3);
    expect((await host.store.dueOpen(1_000_000, 10)).sort()).toEqual(names);
    expect(
      await raw.command(['EXISTS', `${prefix}index`, `${prefix}c:{old-a}`, `${prefix}e:{old-a}`, `${prefix}due`]),
    ).toBe(0);
    // A new circuit lists after every moved one; a second start moves nothing and changes nothing.
    await host.store.apply('new', (c) => ({ circuit: c ?? newCircuit('new', settings, 2_000), transitions: [] }));
    const again = await open(prefix);
    expect((await again.store.list({ limit: 10 })).map((c) => [c.name, c.id])).toEqual(
      (await host.store.list({ limit: 10 })).map((c) => [c.name, c.id]),
    );
    expect((await again.store.list({ limit: 10 })).map((c) => c.name)).toEqual([...names, 'new']);
  });

  it('moves a large store whatever the start deadline: the deadline bounds reaching Redis, not the one-off move', async () => {
    const prefix = `t-${randomUUID()}:`;
    const settings = { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
    const scratch = await open(`${prefix}scratch:`);
    const raw = scratch.store.redis;
    const count = 20_000;
    for (let from = 0; from < count; from += 250) {
      // 250 circuits at a time, so no command waits long behind the others
      await Promise.all(
        Array.from({ length: Math.min(250, count - from) }, (_, j) => {
          const i = from + j;
          const name = `old-${i}`;
          const circuit = { ...newCircuit(name, settings, 1_000), id: i + 1 };
          const json = JSON.stringify(circuit);
          return Promise.all([
            raw.command(['HSET', `${prefix}c:{${name}}`, 'v', String(i + 1), 'id', String(i + 1), 'c', json]),
            raw.command(['ZADD', `${prefix}index`, String(i + 1), name]),
          ]);
        }),
      );
    }
    // Far less than moving 20,000 circuits one at a time takes (some 160,000 round trips): before, the move ran inside it and the start failed.
    const host = await openRedisStore({
      url: redis.url(),
      logger: silentLogger,
      prefix,
      startTimeoutMs: 3_000,
      timeoutMs: COMMAND_TIMEOUT_MS,
    });
    opened.push(host);
    expect(await host.store.count()).toBe(count);
    expect(await raw.command(['EXISTS', `${prefix}index`])).toBe(0);
    const first = await host.store.list({ limit: 3 });
    expect(first.map((c) => [c.name, Math.floor(c.id / SHARDS)])).toEqual([
      ['old-0', 1],
      ['old-1', 2],
      ['old-2', 3],
    ]);
  }, 120_000); // 20,000 circuits written and moved: CPU-bound, and slow on a busy machine
});
