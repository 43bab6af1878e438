import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BreakerService } from '../../src/service/breaker-service.js';
import { activityStampMs, Housekeeping, type HousekeepingOptions } from '../../src/service/housekeeping.js';
import type { CircuitStore } from '../../src/store/circuit-store.js';
import type { HousekeepingStore } from '../../src/store/housekeeping-store.js';
import { RedisHousekeeping } from '../../src/store/redis/redis-housekeeping.js';
import { SqliteHousekeeping } from '../../src/store/sqlite/housekeeping.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { FakeClock } from '../helper.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { closeTestStores, redisTestStore } from '../redis/test-store.js';

const DAY_MS = 86_400_000;
let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  closeTestStores();
  await redis.stop('SIGKILL');
});

interface Fixture {
  readonly store: CircuitStore;
  readonly housekeeping: HousekeepingStore;
  /** Every transition in the log `/events/stream` replays (the table, or the stream), per circuit, oldest first. */
  readonly log: () => Promise<Map<string, number[]>>;
}

const stores: [string, () => Promise<Fixture>][] = [
  [
    'SQLite',
    async () => {
      const db = openDatabase(':memory:', { exclusive: true });
      migrate(db, readMigrations(defaultMigrationsDir()));
      const store = new SqliteCircuitStore(db, true); // exclusive: the cache must hear of deletions
      const log = async () => {
        const rows = db
          .prepare<[], { name: string; at: number }>(
            'SELECT c.name, t.at FROM transitions t JOIN circuits c ON c.id = t.circuit_id ORDER BY t.id',
          )
          .all();
        return group(rows.map((r) => [r.name, r.at]));
      };
      return { store, housekeeping: new SqliteHousekeeping(db, (name) => store.forget(name)), log };
    },
  ],
  [
    'Redis',
    async () => {
      const store = redisTestStore(redis.url());
      await store.ready();
      const log = async () => {
        const streams = await Promise.all(
          store.keys.shards.map((k) => store.redis.command<[string, string[]][]>(['XRANGE', k.transitions, '-', '+'])),
        );
        return group(streams.flat().map(([, f]) => [f[1]!, Number(f[f.indexOf('at') + 1])]));
      };
      return { store, housekeeping: new RedisHousekeeping(store), log };
    },
  ],
];

/** A circuit's transitions as `GET /circuits/:name/events` serves them, oldest first. */
async function events(store: CircuitStore, name: string): Promise<number[]> {
  const circuit = await store.find(name);
  return (await store.events(circuit!.id, 500)).map((t) => t.at).reverse();
}

function group(rows: [string, number][]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const [name, at] of rows) out.set(name, [...(out.get(name) ?? []), at]);
  return out;
}

function service(store: CircuitStore, clock: FakeClock, idleDays: number | null = null) {
  const limits = idleDays === null ? {} : { activityStampMs: activityStampMs(idleDays) };
  return new BreakerService({
    store,
    clock: clock.now,
    logger: pino({ level: 'silent' }),
    circuitDefaults: { failureThreshold: 1, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    policy: { probeLeaseMs: 10_000 },
    groupCommit: false,
    limits,
  });
}

/** Open and reset `name` `times` times: two transitions each, at the clock's time. */
async function cycle(breaker: BreakerService, name: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    await breaker.record(name, { success: false });
    await breaker.reset(name);
  }
}

function job(store: HousekeepingStore, clock: FakeClock, options: Partial<HousekeepingOptions> = {}) {
  let batches = 0;
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  );
  const housekeeping = new Housekeeping(store, clock.now, logger, {
    maxAgeDays: 30,
    maxPerCircuit: 1_000,
    idleCircuitDays: null,
    isDeclared: () => false,
    batch: 3,
    yieldBetween: async () => void batches++,
    ...options,
  });
  return { housekeeping, lines, batches: () => batches };
}

describe.each(stores)('housekeeping on %s', (_name, open) => {
  it('deletes transitions older than events.retention.max_age_days in small batches and keeps the younger ones', async () => {
    const { store, housekeeping, log } = await open();
    const clock = new FakeClock();
    const breaker = service(store, clock);
    const oldAt = clock.now();
    await cycle(breaker, 'old', 4); // 8 transitions, 31 days old by the sweep
    clock.advance(31 * DAY_MS);
    const youngAt = clock.now();
    await cycle(breaker, 'old', 1);
    await cycle(breaker, 'young', 2);
    const { housekeeping: run, batches } = job(housekeeping, clock);

    const report = await run.sweep();

    expect(report.trimmedByAge).toBe(8);
    expect(batches()).toBeGreaterThanOrEqual(3); // 8 rows at 3 a batch: a yield between every two
    const left = await log();
    expect(left.get('old')).toEqual([youngAt, youngAt]);
    expect(left.get('young')).toEqual([youngAt, youngAt, youngAt, youngAt]);
    expect(await events(store, 'old')).toEqual([youngAt, youngAt]); // GET /circuits/old/events too
    expect(oldAt).toBeLessThan(youngAt);
    expect((await run.sweep()).trimmedByAge).toBe(0); // nothing left to trim
  });

  it('keeps only the newest events.retention.max_per_circuit transitions of each circuit', async () => {
    const { store, housekeeping } = await open();
    const clock = new FakeClock();
    const breaker = service(store, clock);
    for (let i = 0; i < 5; i++) {
      await cycle(breaker, 'busy', 1);
      clock.advance(1_000);
    }
    await cycle(breaker, 'quiet', 1);
    const { housekeeping: run } = job(housekeeping, clock, { maxPerCircuit: 4 });

    await run.sweep();

    const start = new FakeClock().now();
    expect(await events(store, 'busy')).toEqual([start + 3_000, start + 3_000, start + 4_000, start + 4_000]);
    expect(await events(store, 'quiet')).toHaveLength(2);
  });

  it('deletes closed, unforced, undeclared circuits with no outcome for limits.idle_circuit_days, logging each', async () => {
    const { store, housekeeping } = await open();
    const clock = new FakeClock();
    const breaker = service(store, clock, 7);
    await breaker.record('idle', { success: true });
    await breaker.record('tripped', { success: false }); // open: kept
    await breaker.configure('forced', () => ({ ...breaker.defaults, forcedState: 'closed' }));
    await breaker.record('declared', { success: true });
    await breaker.record('in-use', { success: true });
    for (let day = 0; day < 10; day++) {
      clock.advance(DAY_MS);
      await breaker.record('in-use', { success: true }); // successes on a healthy circuit: nothing else changes
    }
    const { housekeeping: run, lines } = job(housekeeping, clock, {
      idleCircuitDays: 7,
      isDeclared: (n) => n === 'declared',
    });

    const report = await run.sweep();

    expect(report.idleDeleted).toBe(1);
    expect(lines.filter((l) => l.event === 'circuit_deleted').map((l) => [l.circuit, l.reason])).toEqual([
      ['idle', 'idle'],
    ]);
    await vi.waitFor(async () => expect(await store.find('idle')).toBeNull()); // Redis: the host's cache hears the publish
    for (const kept of ['tripped', 'forced', 'declared', 'in-use']) expect(await store.find(kept), kept).not.toBeNull();
  });

  it('keeps an idle circuit with an isolated caller, and the isolation with it', async () => {
    const { store, housekeeping } = await open();
    const clock = new FakeClock();
    const breaker = service(store, clock, 7);
    const quorum = { minCallers: 2, windowSeconds: 60, maxCallers: 100 };
    for (const name of ['isolating', 'healthy']) await breaker.configure(name, () => ({ ...breaker.defaults, quorum }));
    await breaker.record('isolating', { success: false, caller: 'bad' }); // failure_threshold 1: 'bad' alone is isolated
    await breaker.record('healthy', { success: true, caller: 'good' });
    clock.advance(10 * DAY_MS);
    const { housekeeping: run } = job(housekeeping, clock, { idleCircuitDays: 7 });

    expect((await run.sweep()).idleDeleted).toBe(1);

    await vi.waitFor(async () => expect(await store.find('healthy')).toBeNull());
    const kept = await store.find('isolating');
    expect(kept?.callers?.map((e) => [e[0], e[4] !== null])).toEqual([['bad', true]]);
    // Still isolated: one probe for 'bad', then refused for it alone while the probe runs.
    expect((await breaker.allowed('isolating', 'bad'))?.verdict.allowed).toBe(true);
    expect((await breaker.allowed('isolating', 'bad'))?.verdict).toMatchObject({ allowed: false, scope: 'caller' });
  });

  it('keeps a circuit whose last outcome is younger than limits.idle_circuit_days', async () => {
    const { store, housekeeping } = await open();
    const clock = new FakeClock();
    const breaker = service(store, clock, 7);
    await breaker.record('recent', { success: true });
    clock.advance(6 * DAY_MS);
    const { housekeeping: run } = job(housekeeping, clock, { idleCircuitDays: 7 });

    expect((await run.sweep()).idleDeleted).toBe(0);
    clock.advance(2 * DAY_MS);
    expect((await run.sweep()).idleDeleted).toBe(1);
  });
});

describe('housekeeping schedule', () => {
  it('stops a running sweep after its current batch', async () => {
    let calls = 0;
    const store: HousekeepingStore = {
      trimByAge: () => {
        calls++;
        return 3; // always a full batch: an endless backlog
      },
      trimPerCircuit: () => ({ deleted: 0, cursor: 0, done: true }),
      deleteIdle: () => ({ deleted: [], cursor: 0, done: true }),
    };
    const clock = new FakeClock();
    const { housekeeping: run } = job(store, clock, {
      intervalMs: 3_600_000,
      yieldBetween: async () => {
        if (calls === 5) run.stop();
      },
    });
    run.start();
    await run.sweep(); // joins the sweep start() began
    expect(calls).toBe(5);
  });
});
