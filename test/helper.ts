import pino from 'pino';
import { createApp, type AppDeps } from '../src/app.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../src/store/database.js';
import { SqliteCircuitStore } from '../src/store/circuit-store.js';

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

/** The app on an in-memory database with a fake clock; requests go through `app.request()`. */
export function buildApp(overrides: Partial<AppDeps> = {}) {
  const clock = new FakeClock();
  const { db, store } = memoryStore();
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
