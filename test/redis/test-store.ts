import { randomUUID } from 'node:crypto';
import { createClient } from '@redis/client';
import pino from 'pino';
import type { RedisConnection } from '../../src/store/redis/connect.js';
import type { Subscriber } from '../../src/store/redis/change-subscription.js';
import { clusterLinks } from '../../src/store/redis/cluster-connect.js';
import { isClusterUrl, parseClusterUrl } from '../../src/store/redis/cluster-url.js';
import { connectionLink } from '../../src/store/redis/redis-commands.js';
import { RedisCircuitStore } from '../../src/store/redis/redis-store.js';

const open: RedisConnection[] = [];

/**
 * Each command of a test store may take 10 s, not the service's 1 s: on a busy machine a
 * Cluster's first slot discovery, or a command behind another file's load, can pass a second,
 * and the suites run here test the service over a store, not the store's timeout
 * (test/e2e/redis-faults.test.ts does that on a real server).
 */
const TEST_STORE_TIMEOUT_MS = 10_000;

/**
 * A Redis store made synchronously for `buildApp`, on the test's own redis-server
 * (`CIRCUITLOG_TEST_REDIS_URL`, set by `setup-redis.ts`): its connections queue commands
 * until connected, and a key prefix of its own keeps each app's circuits apart.
 */
export function redisTestStore(url: string): RedisCircuitStore {
  if (isClusterUrl(url)) return clusterTestStore(url);
  const connect = () => {
    const client = createClient({ url, RESP: 2 }) as unknown as RedisConnection;
    client.on('error', () => {}); // a test that stops its server sees the errors through the store
    client.connect().catch(() => {}); // destroyed before it connected: nothing to report
    open.push(client);
    return client;
  };
  return new RedisCircuitStore(connectionLink(connect()), connect() as unknown as Subscriber, {
    prefix: `t-${randomUUID()}:`,
    logger: pino({ level: 'silent' }),
    timeoutMs: TEST_STORE_TIMEOUT_MS,
  });
}

const closers: (() => void)[] = [];

/** The same on a Redis Cluster (`setup-redis-cluster.ts`): the cluster client and its subscription. */
function clusterTestStore(url: string): RedisCircuitStore {
  const parsed = parseClusterUrl(url);
  if ('problem' in parsed) throw new Error(parsed.problem);
  const logger = pino({ level: 'silent' });
  const links = clusterLinks(parsed, logger, false);
  closers.push(() => links.close());
  return new RedisCircuitStore(links.link, links.subscriber, {
    prefix: `t-${randomUUID()}:`,
    logger,
    timeoutMs: TEST_STORE_TIMEOUT_MS,
  });
}

export function closeTestStores(): void {
  for (const client of open.splice(0)) client.destroy();
  for (const close of closers.splice(0)) close();
}
