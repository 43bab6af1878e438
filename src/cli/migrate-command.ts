import { openExisting, schemaVersion } from './database-file.js';
import { EXIT, type ExitCode } from './exit-codes.js';
import type { Output } from './output.js';
import { buildVersion } from './restore-command.js';

/**
 * `migrate --check`: the database's schema version against this build's. Exit 0 when equal,
 * 4 when the build has migrations the database lacks (the server applies them at start),
 * 5 when the database is newer than the build.
 */
export function checkMigrations(db: string, json: boolean, io: Output): ExitCode {
  const handle = openExisting(db, { readonly: true });
  let database: number;
  try {
    database = schemaVersion(handle, db);
  } finally {
    handle.close();
  }
  const build = buildVersion();
  const status = database === build.version ? 'current' : database < build.version ? 'pending' : 'newer';
  if (json)
    io.out(`${JSON.stringify({ database: db, database_version: database, build_version: build.version, status })}\n`);
  else {
    io.out(`database ${db}: schema version ${database}\n`);
    io.out(`this build: schema version ${build.version} (${build.name})\n`);
    const says = {
      current: 'up to date',
      pending: `${build.version - database} migration(s) pending; the server applies them when it starts`,
      newer: 'the database is newer than this build: run a newer circuitlog on it',
    };
    io.out(`${says[status]}\n`);
  }
  return status === 'current' ? EXIT.OK : status === 'pending' ? EXIT.MIGRATIONS_PENDING : EXIT.DATABASE_NEWER;
}
