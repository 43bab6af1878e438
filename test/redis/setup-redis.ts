// setupFiles of the `redis` project: the behaviour suites run again with buildApp on a Redis
// store, against a redis-server of this test file's own (random loopback port, temp dir).
import { afterAll } from 'vitest';
import { startRedis } from './redis-server.js';
import { closeTestStores } from './test-store.js';

const server = await startRedis();
process.env.CIRCUITLOG_TEST_REDIS_URL = server.url();

afterAll(async () => {
  closeTestStores();
  await server.stop('SIGKILL');
});
