import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { newCircuit, recordFailure } from '../../src/domain/circuit.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { CircuitSnapshot } from '../../src/store/sqlite/circuit-snapshot.js';
import { tempDir } from '../server-process.js';

const run = promisify(execFile);
const settings = { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 1 };

describe('migrations', () => {
  it('applies each file once, recorded in the database, and picks up a new file on the next start', () => {
    const dir = tempDir();
    const migrations = path.join(dir, 'migrations');
    fs.mkdirSync(migrations);
    for (const file of fs.readdirSync(defaultMigrationsDir()))
      fs.copyFileSync(path.join(defaultMigrationsDir(), file), path.join(migrations, file));
    const file = path.join(dir, 'db.sqlite');

    let db = openDatabase(file);
    const all = readMigrations(migrations).map((m) => m.name);
    expect(all[0]).toBe('0001_circuits.sql');
    expect(migrate(db, readMigrations(migrations))).toEqual(all);
    db.close();
    db = openDatabase(file);
    expect(migrate(db, readMigrations(migrations))).toEqual([]);
    db.close();

    fs.writeFileSync(path.join(migrations, '9999_extra.sql'), 'CREATE TABLE extra (id INTEGER PRIMARY KEY);');
    db = openDatabase(file);
    expect(migrate(db, readMigrations(migrations))).toEqual(['9999_extra.sql']);
    expect(db.prepare('SELECT count(*) FROM schema_migrations').pluck().get()).toBe(all.length + 1);
    db.close();
  });

  it('rolls back a failing migration whole', () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, '0001_bad.sql'), 'CREATE TABLE a (id INTEGER); CREATE TABLE a (id INTEGER);');
    const db = openDatabase(path.join(dir, 'db.sqlite'));
    expect(() => migrate(db, readMigrations(dir))).toThrow(/already exists/);
    expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'a'").pluck().get()).toBe(0);
    expect(db.prepare('SELECT count(*) FROM schema_migrations').pluck().get()).toBe(0);
  });

  it('opens the database in WAL mode with a busy timeout', () => {
    const db = openDatabase(path.join(tempDir(), 'db.sqlite'));
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('busy_timeout', { simple: true })).toBe(5000);
  });
});

describe('SqliteCircuitStore', () => {
  function store() {
    const db = openDatabase(path.join(tempDir(), 'db.sqlite'));
    migrate(db, readMigrations(defaultMigrationsDir()));
    return { db, store: new SqliteCircuitStore(db) };
  }

  it('writes nothing when a step returns the circuit it was given', () => {
    const { db, store: s } = store();
    s.apply('svc', (c) => ({ circuit: c ?? newCircuit('svc', settings, 1), transitions: [] }));
    const before = db.prepare('SELECT total_changes()').pluck().get();
    const result = s.apply('svc', (c) => ({ circuit: c!, transitions: [] }));
    expect(result?.circuit.name).toBe('svc');
    expect(db.prepare('SELECT total_changes()').pluck().get()).toBe(before);
  });

  it('writes the transition rows in the same transaction as the change', () => {
    const { db, store: s } = store();
    s.apply('svc', (c) => ({ circuit: c ?? newCircuit('svc', settings, 1), transitions: [] }));
    for (let i = 0; i < 3; i++) s.apply('svc', (c) => recordFailure(c!, 10));
    expect(s.find('svc')?.state).toBe('open');
    expect(db.prepare('SELECT from_state, to_state, reason FROM transitions').all()).toEqual([
      { from_state: 'closed', to_state: 'open', reason: 'failure_threshold_reached' },
    ]);
  });

  it('counts its circuits in O(1), exactly through inserts and deletes, and the state gauges read that count', () => {
    const { db, store: s } = store();
    for (const name of ['a', 'b', 'c'])
      s.apply(name, (c) => ({ circuit: c ?? newCircuit(name, settings, 1), transitions: [] }));
    for (let i = 0; i < 3; i++) s.apply('b', (c) => recordFailure(c!, 10));
    s.delete('c');
    expect(s.count()).toBe(2);
    expect(db.prepare('SELECT n FROM circuit_count').pluck().get()).toBe(
      db.prepare('SELECT count(*) FROM circuits').pluck().get(),
    );
    expect(new CircuitSnapshot(db).stateCounts(20)).toEqual({ closed: 1, open: 1, half_open: 0 });
    expect(new CircuitSnapshot(db).stateCounts(10 + 31_000)).toEqual({ closed: 1, open: 0, half_open: 1 }); // open time over
  });

  it('keeps counts exact across processes writing one file', async () => {
    const file = path.join(tempDir(), 'db.sqlite');
    migrate(openDatabase(file), readMigrations(defaultMigrationsDir()));
    const startAt = String(Date.now() + 500);
    await Promise.all(
      [1, 2, 3, 4].map(() => run(process.execPath, ['test/fixtures/hammer.mjs', file, 'fail', '150', startAt])),
    );
    const db = openDatabase(file);
    expect(db.prepare("SELECT failure_count FROM circuits WHERE name = 'shared'").pluck().get()).toBe(600);
    expect(db.prepare('SELECT count(*) FROM circuits').pluck().get()).toBe(1);
  });

  it('admits exactly one half-open probe across processes', async () => {
    const file = path.join(tempDir(), 'db.sqlite');
    const db = openDatabase(file);
    migrate(db, readMigrations(defaultMigrationsDir()));
    const s = new SqliteCircuitStore(db);
    // An open circuit whose open time has already passed: the next check half-opens it.
    s.apply('shared', () => ({
      circuit: { ...newCircuit('shared', settings, 0), state: 'open', failureCount: 3, openUntil: Date.now() - 1 },
      transitions: [],
    }));
    const startAt = String(Date.now() + 500);
    const outputs = await Promise.all(
      [1, 2, 3, 4].map(() => run(process.execPath, ['test/fixtures/hammer.mjs', file, 'admit', '50', startAt])),
    );
    const admitted = outputs.reduce((sum, o) => sum + (JSON.parse(o.stdout) as { admitted: number }).admitted, 0);
    expect(admitted).toBe(1);
    expect(db.prepare("SELECT count(*) FROM transitions WHERE to_state = 'half_open'").pluck().get()).toBe(1);
  });
});
