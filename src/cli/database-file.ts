import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { schemaVersion as storeSchemaVersion } from '../store/sqlite/database.js';
import { parseStoreChoice } from '../config/store-choice.js';
import { CliError, EXIT, usageError } from './exit-codes.js';

/**
 * The SQLite file a file command works on: `--db`, else the server's own setting
 * (`CIRCUITLOG_STORE=sqlite:<path>`, `CIRCUITLOG_DB`, default `./data/circuitlog.db`).
 */
export function databasePath(db: string | undefined, env: NodeJS.ProcessEnv): string {
  if (db !== undefined) {
    if (db === '') throw usageError('--db: needs a file path');
    return db;
  }
  const choice = parseStoreChoice(env, (message) => usageError(message));
  if (choice.kind === 'redis')
    throw usageError('CIRCUITLOG_STORE names a Redis: this command works on a SQLite file; pass --db <file>');
  return choice.path;
}

/**
 * Whether a running server holds `file`: we ask SQLite for the exclusive lock at once (no
 * busy wait). A single server keeps the file locked exclusively (`locking_mode = EXCLUSIVE`)
 * while it runs, and workers sharing it keep a shared lock open in WAL mode, so either way
 * the lock is refused; a stopped server (even a killed one) holds nothing.
 */
export function heldByServer(file: string): boolean {
  const db = openExisting(file, {});
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return false;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY') return true;
    throw sqliteError(file, error);
  } finally {
    db.close(); // the last connection checkpoints the WAL into the file
  }
}

/** Open a file that must exist; SQLite's own errors become one line naming it. */
export function openExisting(file: string, options: { readonly?: boolean }): Database.Database {
  if (!fs.existsSync(file)) throw new CliError(EXIT.FAILED, `no database at '${file}'`);
  try {
    return new Database(file, { fileMustExist: true, readonly: options.readonly ?? false, timeout: 0 });
  } catch (error) {
    throw sqliteError(file, error);
  }
}

export function sqliteError(file: string, error: unknown): CliError {
  const code = (error as { code?: unknown }).code;
  if (code === 'SQLITE_NOTADB') return new CliError(EXIT.FAILED, `'${file}' is not a SQLite database`);
  return new CliError(
    EXIT.FAILED,
    `'${file}': ${(error as Error).message}${typeof code === 'string' ? ` (${code})` : ''}`,
  );
}

/** The highest migration recorded in a circuitlog database (the store's own reading), or a CliError when it is none. */
export function schemaVersion(db: Database.Database, file: string): number {
  let version: number;
  try {
    version = storeSchemaVersion(db);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY')
      throw new CliError(
        EXIT.FAILED,
        `'${file}' is held by a running circuitlog (a single server locks its file); it migrated the database when it started`,
      );
    throw sqliteError(file, error);
  }
  if (version === 0) throw new CliError(EXIT.FAILED, `'${file}' is not a circuitlog database (no migration recorded)`);
  return version;
}

/** A temporary name next to `file` (same filesystem, so the final rename is atomic). */
export function temporaryNextTo(file: string): string {
  return path.join(path.dirname(path.resolve(file)), `.${path.basename(file)}.${process.pid}.part`);
}

/** Refuse to replace an existing file unless asked to. */
export function checkTarget(file: string, overwrite: boolean): void {
  if (fs.existsSync(file) && !overwrite)
    throw new CliError(EXIT.FAILED, `'${file}' exists; pass --overwrite to replace it`);
  const folder = path.dirname(path.resolve(file));
  if (!fs.existsSync(folder)) throw new CliError(EXIT.FAILED, `no folder '${folder}' for '${file}'`);
}

/** Move the finished copy into place and flush the folder entry. */
export function moveIntoPlace(temporary: string, file: string): void {
  fs.renameSync(temporary, file);
  const fd = fs.openSync(path.dirname(path.resolve(file)), 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** `12.3 MiB`. */
export function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
