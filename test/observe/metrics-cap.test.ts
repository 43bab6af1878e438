import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { newCircuit, type Circuit } from '../../src/domain/circuit.js';
import { Metrics } from '../../src/observe/metrics.js';
import { CircuitSnapshot } from '../../src/store/sqlite/circuit-snapshot.js';
import { defaultMigrationsDir, migrate, readMigrations } from '../../src/store/sqlite/database.js';
import { CircuitMirror } from '../../src/store/redis/circuit-mirror.js';
import type { RedisCircuitStore } from '../../src/store/redis/redis-store.js';
import { FakeClock } from '../helper.js';
import { parseMetrics } from './observe-app.js';

const SETTINGS = { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 };
const circuit = (id: number): Circuit => ({ ...newCircuit(`c${id}`, SETTINGS, 0), id });

/** A migrated in-memory database that counts the SQL statements run on it. */
function countingDb(count: number) {
  const statements: string[] = [];
  const db = new Database(':memory:', { verbose: (sql) => statements.push(String(sql)) });
  migrate(db, readMigrations(defaultMigrationsDir()));
  const insert = db.prepare(
    'INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES (?, 5, 30, 0, 0)',
  );
  db.transaction(() => {
    for (let i = 1; i <= count; i++) insert.run(`c${i}`);
  })();
  statements.length = 0;
  return { db, statements };
}

/** The circuits that have an outcomes series in the exposition. */
async function labelledCircuits(metrics: Metrics): Promise<string[]> {
  const series = [...parseMetrics(await metrics.render()).keys()].filter((k) =>
    k.startsWith('circuitlog_outcomes_total{'),
  );
  return series.map((k) => /circuit="([^"]+)"/.exec(k)![1]!).sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));
}

describe('metrics.max_circuits on SQLite', () => {
  it('labels exactly the first max_circuits circuits by creation', async () => {
    const { db } = countingDb(30);
    const metrics = new Metrics({ snapshot: new CircuitSnapshot(db), maxCircuits: 10, clock: new FakeClock().now });
    for (let id = 30; id >= 1; id--) metrics.outcome(circuit(id), false, undefined);
    expect(await labelledCircuits(metrics)).toEqual(Array.from({ length: 10 }, (_, i) => `c${i + 1}`));
  });

  it('decides 2,000 outcomes on circuits past the cap with at most one SQL statement', () => {
    const { db, statements } = countingDb(3_000);
    const metrics = new Metrics({ snapshot: new CircuitSnapshot(db), maxCircuits: 100, clock: new FakeClock().now });
    for (let id = 1_001; id <= 3_000; id++) metrics.outcome(circuit(id), false, undefined);
    expect(statements.length).toBeLessThanOrEqual(1);
    expect(statements.join('\n')).not.toMatch(/count\(/i);
  });

  it('reads the cap again once a new circuit appears while the table is below it', () => {
    const { db, statements } = countingDb(3);
    const metrics = new Metrics({ snapshot: new CircuitSnapshot(db), maxCircuits: 5, clock: new FakeClock().now });
    metrics.outcome(circuit(1), true, undefined);
    db.prepare(
      "INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES ('c4', 5, 30, 0, 0)",
    ).run();
    statements.length = 0;
    metrics.outcome(circuit(4), true, undefined);
    expect(statements).toHaveLength(2); // the cap's end (none: below the cap) and the newest id
    metrics.outcome(circuit(4), true, undefined);
    expect(statements).toHaveLength(2);
  });

  it('moves the end of the cap up within 10 s of a deleted circuit', async () => {
    const { db } = countingDb(3);
    const clock = new FakeClock();
    const metrics = new Metrics({ snapshot: new CircuitSnapshot(db), maxCircuits: 2, clock: clock.now });
    metrics.outcome(circuit(3), false, undefined);
    db.prepare("DELETE FROM circuits WHERE name = 'c1'").run();
    clock.advance(10_001);
    metrics.outcome(circuit(3), false, undefined);
    expect(await labelledCircuits(metrics)).toEqual(['c3']);
  });
});

/** A Redis store stand-in: the mirror only needs its change feed and `list`. */
function fakeRedisStore(circuits: Circuit[]) {
  let onChange: (name: string, c: Circuit | null) => void = () => {};
  const store = {
    onChange: (listener: typeof onChange) => (onChange = listener),
    onRebuild: () => {},
    list: ({ afterId, limit }: { afterId: number; limit: number }) =>
      Promise.resolve(circuits.filter((c) => c.id > afterId).slice(0, limit)),
  };
  return {
    store: store as unknown as RedisCircuitStore,
    change: (name: string, c: Circuit | null) => onChange(name, c),
  };
}

describe('metrics.max_circuits on the Redis mirror', () => {
  it('labels exactly the first max_circuits circuits, and moves the end up when one inside is deleted', async () => {
    const fake = fakeRedisStore(Array.from({ length: 30 }, (_, i) => circuit(i + 1)));
    const mirror = new CircuitMirror(fake.store);
    await mirror.load();
    const metrics = new Metrics({ snapshot: mirror, maxCircuits: 10, clock: new FakeClock().now });
    for (let id = 30; id >= 1; id--) metrics.outcome(circuit(id), false, undefined);
    expect(await labelledCircuits(metrics)).toHaveLength(10);
    expect(mirror.capCutoff(10)).toEqual(expect.objectContaining({ lastId: 10, full: true }));
    fake.change('c2', null);
    expect(mirror.capCutoff(10)).toEqual(expect.objectContaining({ lastId: 11, full: true }));
    fake.change('c31', circuit(31));
    expect(mirror.capCutoff(10)).toEqual(expect.objectContaining({ lastId: 11, full: true }));
  });

  it('keeps the cutoff without walking the circuits while circuits are only added', async () => {
    const fake = fakeRedisStore(Array.from({ length: 5_000 }, (_, i) => circuit(i + 1)));
    const mirror = new CircuitMirror(fake.store);
    await mirror.load();
    mirror.capCutoff(100);
    const state = (mirror as unknown as { state: { first: (limit: number) => Circuit[] } }).state;
    let walks = 0;
    const first = state.first.bind(state);
    state.first = (limit) => {
      walks++;
      return first(limit);
    };
    const metrics = new Metrics({ snapshot: mirror, maxCircuits: 100, clock: new FakeClock().now });
    for (let id = 5_001; id <= 6_000; id++) {
      fake.change(`c${id}`, circuit(id));
      metrics.outcome(circuit(id), false, undefined);
    }
    expect(walks).toBe(0);
    expect(mirror.capCutoff(100).lastId).toBe(100);
  });

  it('grows the cap with each new circuit while below it', async () => {
    const fake = fakeRedisStore([circuit(1)]);
    const mirror = new CircuitMirror(fake.store);
    await mirror.load();
    expect(mirror.capCutoff(3)).toEqual(expect.objectContaining({ lastId: 1, full: false }));
    fake.change('c2', circuit(2));
    fake.change('c3', circuit(3));
    fake.change('c4', circuit(4));
    expect(mirror.capCutoff(3)).toEqual(expect.objectContaining({ lastId: 3, full: true }));
  });
});
