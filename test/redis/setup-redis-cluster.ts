// setupFiles of the `redis-cluster` project: the behaviour suites run a third time, with
// buildApp on a Redis store on a Redis Cluster of this test file's own (3 primaries, no
// replicas: random loopback ports, temp dirs).
import { afterAll } from 'vitest';
import { startCluster } from './cluster.js';
import { closeTestStores } from './test-store.js';

const cluster = await startCluster(3, 0);
process.env.CIRCUITLOG_TEST_REDIS_URL = cluster.url;

afterAll(async () => {
  closeTestStores();
  await cluster.stop();
});
