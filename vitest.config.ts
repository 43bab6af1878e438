import { defineConfig } from 'vitest/config';
import DurationSequencer from './test/sequencer.js';

/**
 * Behaviour suites that run three times: on SQLite (project `sqlite`), on Redis (project `redis`)
 * and on a Redis Cluster (project `redis-cluster`),
 * because they prove service logic over an asynchronous store (group commit, the circuit
 * limit, the due-transition timer, the caller quorum, soft throttling's one draw per call, issue 29's cool-downs and ramp). What a store itself must do is proved once per store by
 * test/store/shared-store.test.ts (and test/service/peek-allowed.test.ts), which start their
 * own redis-server; the other HTTP suites run on SQLite only.
 */
const BOTH_STORES = [
  'test/service/due-transitions.test.ts',
  'test/http/policy.test.ts',
  'test/http/limits.test.ts',
  'test/http/quorum-api.test.ts',
  'test/http/caller-credentials.test.ts',
  'test/http/throttle.test.ts',
  'test/http/cool-down.test.ts',
  'test/http/ramp.test.ts',
  'test/http/shadow.test.ts',
  'test/http/outcome-source.test.ts',
];

export default defineConfig({
  test: {
    // End-to-end tests spawn `node dist/main.js`; build it once before any test runs.
    globalSetup: ['test/global-setup.ts'],
    // An unhandled rejection anywhere fails the run (vitest's default, kept explicit), and a
    // spawned server that crashes fails the test it crashed in (test/no-crash-setup.ts).
    dangerouslyIgnoreUnhandledErrors: false,
    setupFiles: ['test/no-crash-setup.ts'],
    reporters: ['default', './test/slowest-files-reporter.ts'],
    // Three files at a time on 2 cores (vitest's default there is one): most files wait on
    // servers, Redis and child processes rather than compute, and every test waits on events,
    // not on an idle machine. Two took the suite past its 10 minutes once issue 30 landed.
    maxWorkers: 3,
    // Longest files first, by the last recorded full run (test/sequencer.ts, test/durations.json).
    sequence: { sequencer: DurationSequencer },
    testTimeout: 30_000,
    hookTimeout: 30_000,
    projects: [
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'] } },
      { extends: true, test: { name: 'redis', include: BOTH_STORES, setupFiles: ['test/redis/setup-redis.ts'] } },
      {
        extends: true,
        test: { name: 'redis-cluster', include: BOTH_STORES, setupFiles: ['test/redis/setup-redis-cluster.ts'] },
      },
    ],
  },
});
