import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { CircuitStore } from '../../src/store/circuit-store.js';
import { openRedisStore, type OpenedRedis } from '../../src/store/redis/open.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { silentLogger } from '../helper.js';
import { startCluster, type RedisCluster } from '../redis/cluster.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { tempDir } from '../server-process.js';

/**
 * Every store, for suites that run the same cases against each (`describe.each(stores)`):
 * SQLite on a temp file, Redis on a redis-server of the calling test file's own (random
 * loopback port, started in `beforeAll`), and Redis on a Redis Cluster of its own (3
 * primaries), each Redis store under a key prefix of its own.
 */
export function everyStore() {
  let redis: RedisServer | undefined;
  let cluster: RedisCluster | undefined;
  const opened: OpenedRedis[] = [];
  beforeAll(async () => {
    [redis, cluster] = await Promise.all([startRedis(), startCluster(3, 0)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(opened.map((o) => o.close()));
    await redis?.stop('SIGKILL');
    await cluster?.stop();
  });
  const track = (o: OpenedRedis): OpenedRedis => {
    opened.push(o);
    return o;
  };
  const redisUrl = () => redis!.url();
  const stores: [string, () => Promise<CircuitStore>][] = [
    [
      'sqlite',
      async () => {
        const db = openDatabase(path.join(tempDir(), 'db.sqlite'));
        migrate(db, readMigrations(defaultMigrationsDir()));
        return new SqliteCircuitStore(db);
      },
    ],
    [
      'redis',
      async () =>
        track(await openRedisStore({ url: redisUrl(), logger: silentLogger, prefix: `t-${randomUUID()}:` })).store,
    ],
    [
      'redis-cluster',
      async () =>
        track(await openRedisStore({ url: cluster!.url, logger: silentLogger, prefix: `t-${randomUUID()}:` })).store,
    ],
  ];
  return { stores, redisUrl, track };
}
