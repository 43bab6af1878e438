import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstAsk, indexPage } from '../../src/store/redis/index-page.js';
import type { RedisCommands } from '../../src/store/redis/redis-commands.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { SHARDS } from '../../src/store/redis/shards.js';
import { silentLogger } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';

let redis: RedisServer;
let opened: OpenedRedis;

beforeAll(async () => {
  redis = await startRedis();
  opened = await openRedisStore({ url: redis.url(0), logger: silentLogger, prefix: `t-${randomUUID()}:` });
});
afterAll(async () => {
  await opened.close();
  await redis.stop();
});

/** The store's commands, counting the ZRANGE rounds (commands sent in one tick) and the ids they answer. */
function counted(): { redis: RedisCommands; rounds: () => number; idsRead: () => number } {
  const inner = opened.store.redis;
  let rounds = 0;
  let idsRead = 0;
  let inRound = false;
  const redis = Object.create(inner) as RedisCommands;
  redis.command = async <T>(args: string[], kind?: 'read' | 'write') => {
    if (!inRound) {
      inRound = true;
      rounds++;
      queueMicrotask(() => (inRound = false));
    }
    const reply = await inner.command<string[]>(args, kind);
    idsRead += reply.length / 2;
    return reply as T;
  };
  return { redis, rounds: () => rounds, idsRead: () => idsRead };
}

/** Index entries for `ids` (id -> shard `id % SHARDS`, as the store numbers them), named by id. */
async function seed(ids: readonly number[]): Promise<void> {
  const { redis: r, keys } = opened.store;
  for (const shard of keys.shards) await r.command(['DEL', shard.index]);
  for (const id of ids) await r.command(['ZADD', keys.shards[id % SHARDS]!.index, String(id), `n${id}`]);
}

const expectedPage = (ids: readonly number[], after: number, limit: number) =>
  [...ids]
    .sort((a, b) => a - b)
    .filter((id) => id > after)
    .slice(0, limit)
    .map((id) => [`n${id}`, id]);

describe('indexPage: a page of ids merged across the 16 shards', () => {
  it('answers the next ids in order from any cursor when every id is in one shard, in at most two rounds', async () => {
    const ids = Array.from({ length: 300 }, (_, i) => (i + 1) * SHARDS + 5); // all in shard 5
    await seed(ids);
    for (const after of [0, ids[0]!, ids[150]!, ids[290]!, ids[299]!]) {
      const c = counted();
      expect(await indexPage(c.redis, opened.store.keys, after, 101)).toEqual(expectedPage(ids, after, 101));
      expect(c.rounds()).toBeLessThanOrEqual(2);
      expect(c.idsRead()).toBeLessThanOrEqual(101 + firstAsk(101));
    }
  });

  it('answers the next ids in order when they spread over the shards, reading about the page, not 16 pages', async () => {
    const ids = Array.from({ length: 2_000 }, (_, i) => (i + 1) * SHARDS + ((i * 7) % SHARDS));
    await seed(ids);
    for (const after of [0, ids[999]!, ids[1_950]!]) {
      const c = counted();
      expect(await indexPage(c.redis, opened.store.keys, after, 101)).toEqual(expectedPage(ids, after, 101));
      expect(c.rounds()).toBeLessThanOrEqual(2);
      expect(c.idsRead()).toBeLessThan(16 * 101 * 0.4); // the merge of full pages read 16 * 101
    }
  });

  it('settles in two rounds whatever the skew: half the ids in one shard, the rest spread', async () => {
    const ids = Array.from({ length: 1_000 }, (_, i) => (i + 1) * SHARDS + (i % 2 === 0 ? 3 : (i * 5) % SHARDS));
    await seed(ids);
    for (const limit of [1, 2, 17, 101, 200]) {
      for (const after of [0, ids[400]!]) {
        const c = counted();
        expect(await indexPage(c.redis, opened.store.keys, after, limit)).toEqual(expectedPage(ids, after, limit));
        expect(c.rounds()).toBeLessThanOrEqual(2);
      }
    }
  });

  it('answers all that is left past the cursor, and nothing past the last id', async () => {
    const ids = [SHARDS + 1, 2 * SHARDS + 2, 3 * SHARDS + 2, 40 * SHARDS + 15];
    await seed(ids);
    expect(await indexPage(opened.store.redis, opened.store.keys, 0, 101)).toEqual(expectedPage(ids, 0, 101));
    expect(await indexPage(opened.store.redis, opened.store.keys, ids[1]!, 2)).toEqual(expectedPage(ids, ids[1]!, 2));
    expect(await indexPage(opened.store.redis, opened.store.keys, ids[3]!, 101)).toEqual([]);
  });
});
