import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { AppError } from '../domain/errors.js';
import { releaseBackupDir, takeBackupDir } from '../store/sqlite/backup-dir.js';
import { problem, retryAfter } from './route-kit.js';
import { ProblemSchema } from './schemas.js';
import { auditRequest, type AuditLog } from '../audit/audit-log.js';

/** Where an online backup comes from: the SQLite store's own connection. */
export interface BackupSource {
  /** Copy the live database, as one consistent state, to a new file at `destination`. */
  backup(destination: string): Promise<unknown>;
  /**
   * The folder (on the database's filesystem) the copy lives in while it is taken and sent;
   * while it exists a backup runs (store/sqlite/backup-dir.ts), in any process on the file.
   */
  readonly workDir: string;
}

export const BACKUP_PATH = '/admin/backup';
const SQLITE_MEDIA_TYPE = 'application/vnd.sqlite3';
const BUSY_RETRY_AFTER_SECONDS = 5;

/**
 * `GET /admin/backup`: an online backup of the SQLite file, taken through the running
 * service's connection (a single server holds the file exclusively, so no other process can
 * read it) and sent as the answer. It needs the token; with no `CIRCUITLOG_TOKEN` it is off
 * (403), since a copy of everything is not a thing to hand to any local process or page.
 * One at a time, from taking the copy until its download ends, across every process on the
 * file: another request meanwhile gets 409 backup-running, never a second copy on the disk.
 * On Redis there is none (Redis has its own persistence).
 */
export function registerBackup(
  app: OpenAPIHono,
  source: BackupSource | undefined,
  tokenSet: boolean,
  audit?: { readonly log: AuditLog; readonly now: () => number },
): void {
  app.get(BACKUP_PATH, (c) => sendBackup(c, source, tokenSet, audit));
  if (source) documentBackup(app); // documented only where there is one
}

/** The backup answer: the checks, then a fresh copy streamed from the backup folder, which goes when the stream ends. */
async function sendBackup(
  c: Context,
  source: BackupSource | undefined,
  tokenSet: boolean,
  audit: { readonly log: AuditLog; readonly now: () => number } | undefined,
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
  const dir = source.workDir;
  if (!(await takeBackupDir(dir)))
    throw new AppError('BACKUP_RUNNING', 'A backup is already being taken or downloaded; try again shortly.', {
      retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS,
    });
  let sending = false;
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
    const { size } = await handle.stat().catch(async (error: unknown) => {
      await handle.close();
      throw error;
    });
    // Recorded once the copy is taken, before a byte of it is sent (issue 30).
    const entry = {
      action: 'backup' as const,
      at: audit?.now() ?? 0,
      circuit: null,
      before: null,
      after: { bytes: size },
    };
    await auditRequest(audit?.log, c, entry); // never rejects: a failed entry is logged (audit-log.ts)
    const stream = handle.createReadStream(); // closes the handle when it ends or is destroyed
    const body = Readable.toWeb(stream) as ReadableStream;
    sending = true;
    releaseWhenRead(stream, size, dir);
    const at = new Date().toISOString().replace(/[:.]/g, '-');
    return c.body(body, 200, {
      'content-type': SQLITE_MEDIA_TYPE,
      'content-length': String(size),
      'content-disposition': `attachment; filename="circuitlog-${at}.db"`,
      'cache-control': 'no-store',
    });
  } finally {
    if (!sending) releaseBackupDir(dir);
  }
}

/**
 * The backup folder goes as the copy's last byte is read, before it can reach the client (so
 * a backup asked for right after one arrived never meets the lock: the stream's `end` would
 * wait for one more read), or when the stream closes early (the connection closed).
 */
function releaseWhenRead(stream: Readable, size: number, dir: string): void {
  let read = 0;
  const release = () => {
    stream.off('data', count).off('close', release);
    releaseBackupDir(dir);
  };
  const count = (chunk: Buffer) => {
    read += chunk.length;
    if (read >= size) release();
  };
  if (size === 0) release();
  else stream.on('data', count).once('close', release); // after toWeb's listener: it sets the pace
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
      409: problem(
        'backup-running: another backup is being taken or downloaded (no second copy is made); Retry-After: 5',
        ProblemSchema,
        retryAfter,
      ),
      503: problem('storage-full: no space for the copy', ProblemSchema, retryAfter),
    },
  });
}
