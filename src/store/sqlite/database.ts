import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { SchemaTooNewError } from '../schema-version.js';
import { createFolder } from './db-file.js';

export type SynchronousMode = 'NORMAL' | 'FULL';

export interface OpenOptions {
  /** SQLite `synchronous` in WAL mode: NORMAL survives process crashes, FULL also power loss. */
  readonly synchronous?: SynchronousMode;
  /** How long a writer waits for the lock before SQLITE_BUSY. */
  readonly busyTimeoutMs?: number;
  /**
   * Hold the file for this connection alone (`locking_mode = EXCLUSIVE`): no file locks
   * per statement, and no other process can open it while we run. For a single server
   * process; several workers on one file need the default shared mode.
   */
  readonly exclusive?: boolean;
}

/** Open (creating the folder) a database file in WAL mode with a busy timeout. */
export function openDatabase(file: string, options: OpenOptions = {}): Database.Database {
  if (file !== ':memory:') createFolder(path.dirname(file));
  const db = new Database(file);
  // Must precede the first WAL access: the WAL index then lives in heap memory, not -shm
  // (https://www.sqlite.org/pragma.html#pragma_locking_mode).
  if (options.exclusive) db.pragma('locking_mode = EXCLUSIVE');
  // https://www.sqlite.org/wal.html: readers never block the writer and vice versa.
  db.pragma('journal_mode = WAL');
  db.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5_000}`); // 5 s
  db.pragma(`synchronous = ${options.synchronous ?? 'NORMAL'}`);
  db.pragma('foreign_keys = ON');
  return db;
}

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** `NNNN_name.sql` files of a folder, in version order. */
export function readMigrations(dir: string): Migration[] {
  return fs
    .readdirSync(dir)
    .filter((file) => /^\d+_[\w-]+\.sql$/.test(file))
    .map((file) => ({
      version: Number.parseInt(file, 10),
      name: file,
      sql: fs.readFileSync(path.join(dir, file), 'utf8'),
    }))
    .sort((a, b) => a.version - b.version);
}

/**
 * Apply the migrations not yet recorded, in order, each in its own write transaction
 * that re-checks the record, so processes starting together apply each file once.
 * Returns the names applied now.
 */
export function migrate(db: Database.Database, migrations: readonly Migration[]): string[] {
  refuseNewerSchema(db, migrations);
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at TEXT    NOT NULL
  )`);
  const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').pluck();
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  const applied: string[] = [];
  for (const migration of migrations) {
    const apply = db.transaction(() => {
      if (isApplied.get(migration.version)) return;
      db.exec(migration.sql);
      record.run(migration.version, migration.name, new Date().toISOString());
      applied.push(migration.name);
    });
    apply.immediate();
  }
  return applied;
}

/**
 * Throws SchemaTooNewError when the database records a migration this build does not have
 * (a newer build ran it); reads only, so such a database is left as it was.
 */
export function refuseNewerSchema(db: Database.Database, migrations: readonly Migration[]): void {
  const known = new Set(migrations.map((m) => m.version));
  const unknown = appliedVersions(db).filter((version) => !known.has(version));
  if (unknown.length === 0) return;
  throw new SchemaTooNewError(Math.max(...unknown), Math.max(0, ...known));
}

/** The database's schema version: the highest migration it records (0 before any). */
export function schemaVersion(db: Database.Database): number {
  return Math.max(0, ...appliedVersions(db));
}

function appliedVersions(db: Database.Database): number[] {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (table === undefined) return [];
  return db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[];
}

/** The repository's own migrations folder, next to `src/` and `dist/`. */
export function defaultMigrationsDir(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'migrations');
}
