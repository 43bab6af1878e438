import fs from 'node:fs';
import { createFolder } from '../store/sqlite/db-file.js';
import { defaultMigrationsDir, readMigrations } from '../store/sqlite/database.js';
import {
  heldByServer,
  moveIntoPlace,
  openExisting,
  schemaVersion,
  sizeText,
  temporaryNextTo,
} from './database-file.js';
import { CliError, EXIT } from './exit-codes.js';
import type { Output } from './output.js';
import path from 'node:path';

/** The newest migration this build has. */
export function buildVersion(): { version: number; name: string } {
  const migrations = readMigrations(defaultMigrationsDir());
  const last = migrations.at(-1);
  return { version: last?.version ?? 0, name: last?.name ?? '' };
}

/**
 * `restore <file>`: check that `file` is an intact circuitlog database no newer than this
 * build, refuse while a server holds the database, then put a copy of it in the database's
 * place; the old file is kept beside it as `<db>.before-restore-<time>`.
 */
export async function restoreDatabase(file: string, db: string, json: boolean, io: Output): Promise<void> {
  const source = openExisting(file, { readonly: true });
  const temporary = temporaryNextTo(db);
  try {
    const version = checkBackup(source, file);
    if (fs.existsSync(db) && heldByServer(db))
      throw new CliError(EXIT.FAILED, `a running circuitlog holds '${db}'; stop it before restoring`);
    createFolder(path.dirname(path.resolve(db)));
    await source.backup(temporary); // a clean single file (no -wal), whatever state the copy was in
    const kept = fs.existsSync(db) ? setAside(db) : null;
    moveIntoPlace(temporary, db);
    const bytes = fs.statSync(db).size;
    if (json) io.out(`${JSON.stringify({ restored: file, database: db, schema_version: version, kept })}\n`);
    else
      io.out(
        `restored ${file} (${sizeText(bytes)}, schema version ${version}) to ${db}${kept ? `; the old database is kept as ${kept}` : ''}\n`,
      );
  } finally {
    source.close();
    fs.rmSync(temporary, { force: true });
  }
}

/** An intact circuitlog database whose schema this build can run (it migrates older ones at start). */
function checkBackup(source: ReturnType<typeof openExisting>, file: string): number {
  const version = schemaVersion(source, file);
  const integrity = source.pragma('integrity_check', { simple: true });
  if (integrity !== 'ok') throw new CliError(EXIT.FAILED, `'${file}' fails SQLite's integrity check: ${integrity}`);
  const circuits = source.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'circuits'").get();
  if (!circuits) throw new CliError(EXIT.FAILED, `'${file}' is not a circuitlog database (no circuits table)`);
  const build = buildVersion();
  if (version > build.version)
    throw new CliError(
      EXIT.FAILED,
      `'${file}' has schema version ${version}, newer than this build's ${build.version}: restore it with a newer circuitlog`,
    );
  return version;
}

/** Move the current database (and any -wal/-shm left beside it) out of the way; its new name. */
function setAside(db: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const kept = `${db}.before-restore-${stamp}`;
  fs.renameSync(db, kept);
  for (const suffix of ['-wal', '-shm']) {
    if (fs.existsSync(`${db}${suffix}`)) fs.renameSync(`${db}${suffix}`, `${kept}${suffix}`);
  }
  return kept;
}
