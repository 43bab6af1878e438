import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { AppError } from '../domain/errors.js';
import { ProblemSchema } from './schemas.js';

/** Where an online backup comes from: the SQLite store's own connection. */
export interface BackupSource {
  /** Copy the live database, as one consistent state, to a new file at `destination`. */
  backup(destination: string): Promise<unknown>;
  /** A folder on the database's filesystem for the copy while it is sent. */
  readonly folder: string;
}

export const BACKUP_PATH = '/admin/backup';
const SQLITE_MEDIA_TYPE = 'application/vnd.sqlite3';

const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: ProblemSchema } },
});

/**
 * `GET /admin/backup`: an online backup of the SQLite file, taken through the running
 * service's connection (a single server holds the file exclusively, so no other process can
 * read it) and sent as the answer. It needs the token; with no `CIRCUITLOG_TOKEN` it is off
 * (403), since a copy of everything is not a thing to hand to any local process or page.
 * One at a time; on Redis there is none (Redis has its own persistence).
 */
export function registerBackup(app: OpenAPIHono, source: BackupSource | undefined, tokenSet: boolean): void {
  const lock = { running: false };
  app.get(BACKUP_PATH, (c) => sendBackup(c, source, tokenSet, lock));
  if (source) documentBackup(app); // documented only where there is one
}

/** The backup answer: the checks, then a fresh copy streamed from a temporary folder. */
async function sendBackup(
  c: Context,
  source: BackupSource | undefined,
  tokenSet: boolean,
  lock: { running: boolean },
): Promise<Response> {
  if (!source)
    throw new AppError(
      'NOT_FOUND',
      'Online backup is for the SQLite store; back up Redis with its own persistence (BGSAVE, AOF).',
    );
  if (!tokenSet)
    throw new AppError(
      'ADMIN_DISABLED',
      `${BACKUP_PATH} is off while CIRCUITLOG_TOKEN is unset: set a token to take online backups.`,
    );
  if (c.req.method === 'HEAD')
    return c.body(null, 200, { 'content-type': SQLITE_MEDIA_TYPE, 'cache-control': 'no-store' }); // no copy for nobody
  if (lock.running)
    throw new AppError('STORAGE_BUSY', 'A backup is already being taken; try again shortly.', {
      retryAfterSeconds: 5,
    });
  lock.running = true;
  const dir = await fs.mkdtemp(path.join(source.folder, '.circuitlog-backup-')).catch((error: unknown) => {
    lock.running = false;
    throw error;
  });
  try {
    const file = path.join(dir, 'backup.db');
    await source.backup(file).catch((error: unknown) => {
      const code = (error as { code?: unknown }).code;
      if (code === 'SQLITE_FULL' || code === 'ENOSPC')
        throw new AppError('STORAGE_FULL', 'No space left for the backup copy; nothing was changed.', {
          retryAfterSeconds: 10,
        });
      throw error;
    });
    const handle = await fs.open(file);
    const { size } = await handle.stat();
    const stream = handle.createReadStream(); // the open file outlives its name, removed below
    const at = new Date().toISOString().replace(/[:.]/g, '-');
    return c.body(Readable.toWeb(stream) as ReadableStream, 200, {
      'content-type': SQLITE_MEDIA_TYPE,
      'content-length': String(size),
      'content-disposition': `attachment; filename="circuitlog-${at}.db"`,
      'cache-control': 'no-store',
    });
  } finally {
    lock.running = false;
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** `GET /admin/backup` in the OpenAPI document. */
function documentBackup(app: OpenAPIHono): void {
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: BACKUP_PATH,
    tags: ['service'],
    summary: 'Online backup: the SQLite database as one consistent file, taken while the service runs (token required)',
    security: [{ bearer: [] }],
    responses: {
      200: { description: 'The database file (SQLite 3)', content: { [SQLITE_MEDIA_TYPE]: {} } },
      401: problem('unauthorized: no or a wrong bearer token'),
      403: problem('admin-disabled: CIRCUITLOG_TOKEN is unset'),
      405: problem('Another method than GET or HEAD'),
      503: problem('storage-busy: a backup is already running; storage-full: no space for the copy'),
    },
  });
}
