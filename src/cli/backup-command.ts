import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Answer, ApiTarget } from './api.js';
import { cappedText, send } from './api.js';
import {
  checkTarget,
  heldByServer,
  moveIntoPlace,
  openExisting,
  schemaVersion,
  sizeText,
  temporaryNextTo,
} from './database-file.js';
import { CliError, EXIT } from './exit-codes.js';
import type { Output } from './output.js';
import { ProgressLine } from './progress.js';

const SQLITE_MAGIC = 'SQLite format 3\0'; // https://www.sqlite.org/fileformat.html#the_database_header
const BUSY_STATUSES = [409, 429, 503];
const DEFAULT_RETRY_SECONDS = 5; // when a busy answer carries no Retry-After
const MAX_PROBLEM_BYTES = 64 * 1024; // 64 KiB

export interface BackupRequest {
  readonly file: string;
  readonly overwrite: boolean;
  readonly waitSeconds: number;
  readonly json: boolean;
}

/** `backup <file>` through the running server's `GET /admin/backup`, retrying while another runs. */
export async function backupThroughApi(target: ApiTarget, request: BackupRequest, io: Output): Promise<void> {
  checkTarget(request.file, request.overwrite);
  const answer = await backupAnswer(target, request.waitSeconds, io);
  const total = Number(answer.headers.get('content-length') ?? 0);
  const progress = new ProgressLine(io, 'backup');
  const temporary = temporaryNextTo(request.file);
  try {
    const bytes = await save(answer, temporary, (done) => progress.update(done, total));
    if (total > 0 && bytes !== total)
      throw new CliError(EXIT.FAILED, `the backup ended after ${bytes} of ${total} bytes; nothing was written`);
    checkSqliteHeader(temporary);
    moveIntoPlace(temporary, request.file);
    progress.finish(`${sizeText(bytes)} written to ${request.file}`);
    report(io, request, { file: request.file, bytes, source: target.url });
  } finally {
    fs.rmSync(temporary, { force: true });
  }
}

/** The 200 answer, after waiting out busy answers (another backup) for up to `waitSeconds`. */
async function backupAnswer(target: ApiTarget, waitSeconds: number, io: Output): Promise<Answer> {
  const deadline = Date.now() + waitSeconds * 1000;
  for (;;) {
    const answer = await send(target, 'GET', '/admin/backup', { pass: BUSY_STATUSES });
    if (answer.status === 200) return answer;
    const problem = parseProblem(await cappedText(answer.response, MAX_PROBLEM_BYTES));
    const busy = answer.status !== 503 || problem.code === 'STORAGE_BUSY';
    const detail = typeof problem.detail === 'string' ? `: ${problem.detail}` : '';
    if (!busy) throw new CliError(EXIT.FAILED, `GET /admin/backup answered ${answer.status}${detail}`);
    const retryMs = retryAfterSeconds(answer.headers.get('retry-after')) * 1000;
    if (Date.now() + retryMs > deadline)
      throw new CliError(
        EXIT.FAILED,
        `another backup is still running (${answer.status}${detail}); gave up after ${waitSeconds} s (--wait)`,
      );
    io.err(`backup: another backup is running; retrying in ${retryMs / 1000} s\n`);
    await sleep(retryMs);
  }
}

function parseProblem(text: string | null): { code?: unknown; detail?: unknown } {
  try {
    return (JSON.parse(text ?? '') as { code?: unknown; detail?: unknown } | null) ?? {};
  } catch {
    return {};
  }
}

/** Retry-After as delta-seconds (RFC 9110 section 10.2.3) or an HTTP date. */
function retryAfterSeconds(header: string | null): number {
  if (header === null) return DEFAULT_RETRY_SECONDS;
  if (/^\d+$/.test(header.trim())) return Number(header.trim());
  const at = Date.parse(header);
  return Number.isNaN(at) ? DEFAULT_RETRY_SECONDS : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** Stream the body to `file`, fsynced; the byte count. */
async function save(answer: Answer, file: string, onProgress: (done: number) => void): Promise<number> {
  const body = answer.response.body;
  if (body === null) throw new CliError(EXIT.FAILED, 'the backup answer has no body');
  const fd = fs.openSync(file, 'w', 0o600);
  let bytes = 0;
  try {
    for await (const chunk of body) {
      fs.writeSync(fd, chunk);
      bytes += chunk.byteLength;
      onProgress(bytes);
    }
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  return bytes;
}

function checkSqliteHeader(file: string): void {
  const header = Buffer.alloc(SQLITE_MAGIC.length);
  const fd = fs.openSync(file, 'r');
  try {
    fs.readSync(fd, header, 0, header.length, 0);
  } finally {
    fs.closeSync(fd);
  }
  if (header.toString('latin1') !== SQLITE_MAGIC)
    throw new CliError(EXIT.FAILED, 'the answer is not a SQLite database; nothing was written');
}

/**
 * `backup <file> --offline` (or `--db <path>`): SQLite's online backup API straight from the
 * file, for a server that is down; refused while a server holds the file.
 */
export async function backupFromFile(db: string, request: BackupRequest, io: Output): Promise<void> {
  checkTarget(request.file, request.overwrite);
  if (heldByServer(db))
    throw new CliError(
      EXIT.FAILED,
      `a running circuitlog holds '${db}'; take the backup through it: circuitlog backup ${request.file} (no --offline/--db)`,
    );
  const source = openExisting(db, { readonly: true });
  const progress = new ProgressLine(io, 'backup');
  const temporary = temporaryNextTo(request.file);
  try {
    schemaVersion(source, db); // a circuitlog database, not any SQLite file
    const pageSize = source.pragma('page_size', { simple: true }) as number;
    await source.backup(temporary, {
      progress: ({ totalPages, remainingPages }) => {
        progress.update((totalPages - remainingPages) * pageSize, totalPages * pageSize);
        return 4096; // pages per step
      },
    });
    const bytes = fs.statSync(temporary).size;
    moveIntoPlace(temporary, request.file);
    progress.finish(`${sizeText(bytes)} written to ${request.file}`);
    report(io, request, { file: request.file, bytes, source: db });
  } finally {
    source.close();
    fs.rmSync(temporary, { force: true });
  }
}

function report(io: Output, request: BackupRequest, result: { file: string; bytes: number; source: string }): void {
  if (request.json) io.out(`${JSON.stringify(result)}\n`);
  else io.out(`${result.file}\n`);
}
