import pino from 'pino';
import { createApp, type AppDeps } from '../src/app.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../src/store/sqlite/database.js';
import type { CircuitStore } from '../src/store/circuit-store.js';
import { SqliteCircuitStore } from '../src/store/sqlite/circuit-store.js';
import { redisTestStore } from './redis/test-store.js';

/** A clock the test moves by hand. */
export class FakeClock {
  constructor(public nowMs = Date.parse('2026-11-30T03:30:00.000Z')) {}
  readonly now = (): number => this.nowMs;
  advance(ms: number): void {
    this.nowMs += ms;
  }
}

export const silentLogger = pino({ level: 'silent' });

/** A migrated in-memory database and its store. */
export function memoryStore() {
  const db = openDatabase(':memory:');
  migrate(db, readMigrations(defaultMigrationsDir()));
  return { db, store: new SqliteCircuitStore(db) };
}

/**
 * The app on an in-memory database with a fake clock; requests go through `app.request()`.
 * In the `redis` test project (CIRCUITLOG_TEST_REDIS_URL set) the store is a Redis one
 * instead: the same suites prove the same behaviour on both stores.
 */
export function buildApp(overrides: Partial<AppDeps> = {}) {
  const clock = new FakeClock();
  const sqlite = memoryStore();
  const redisUrl = process.env.CIRCUITLOG_TEST_REDIS_URL;
  const { db } = sqlite;
  const store: CircuitStore = redisUrl ? redisTestStore(redisUrl) : sqlite.store;
  const built = createApp({
    store,
    clock: clock.now,
    logger: silentLogger,
    circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    policy: { probeLeaseMs: 10_000 },
    ...overrides,
  });
  const request = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    built.app.request(path, {
      method,
      headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
  return { ...built, clock, db, store, request };
}
