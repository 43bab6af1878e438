import fs from 'node:fs';
import path from 'node:path';

// https://www.sqlite.org/fileformat.html#the_database_header
const HEADER_BYTES = 100;
// Linux's limits (limits.h): NAME_MAX for one name, PATH_MAX for a whole path with its NUL.
const NAME_MAX_BYTES = 255;
const PATH_MAX_BYTES = 4096;
const MAGIC = 'SQLite format 3\0';
// statfs f_type of filesystems whose files are not storage (linux/magic.h).
const VIRTUAL_FILESYSTEMS: Record<number, string> = { 40864: '/proc', 1650812274: '/sys', 7377: 'devpts' };

/**
 * Why `file` cannot hold the service's database, or null when it can: checked before SQLite
 * touches anything, so a wrong path stops the start with a reason and leaves the file as it
 * was (no `-wal`/`-shm` next to it). A missing file is fine if its folder can be created.
 *
 * "Read-only" means no write permission bit, or no write access: root may write to a
 * file marked read-only, but a mode without a write bit says it must not be written.
 */
export function databaseFileProblem(file: string): string | null {
  if (file === ':memory:' || file.startsWith('file:')) {
    return 'must be a file path: an in-memory or URI database would lose every circuit at exit';
  }
  try {
    return fileProblem(file);
  } catch (error) {
    const problem = systemErrorProblem(error);
    if (problem === null) throw error;
    return problem;
  }
}

/**
 * What a refusal of the operating system says about the path, in words, or null when `error`
 * is no such refusal (a bug: rethrown). Found from outside: a path through a file, or a name
 * too long, used to end the start with a stack trace.
 */
export function systemErrorProblem(error: unknown): string | null {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  if (typeof code !== 'string' || !/^E[A-Z]+$/.test(code)) return null;
  switch (code) {
    case 'ENAMETOOLONG':
      return `is too long (ENAMETOOLONG: at most ${NAME_MAX_BYTES} bytes a name and ${PATH_MAX_BYTES - 1} the whole path)`;
    case 'ENOTDIR':
      return 'goes through a file as if it were a folder (ENOTDIR)';
    case 'EACCES':
    case 'EPERM':
      return `cannot be reached: permission denied (${code})`;
    case 'ELOOP':
      return 'has a loop of symbolic links (ELOOP)';
    case 'EISDIR':
      return 'is a directory, not a database file';
    case 'EROFS':
      return 'is on a read-only filesystem (EROFS)';
    default:
      return `cannot be used: ${(error as Error).message}`;
  }
}

function fileProblem(file: string): string | null {
  const absolute = path.resolve(file);
  const stat = statOrNull(absolute);
  if (stat === null) return folderProblem(path.dirname(absolute));
  if (stat.isDirectory()) return 'is a directory, not a database file';
  if (!stat.isFile()) return 'is not a regular file (a device, socket or pipe cannot hold a database)';
  const onVirtual = virtualFilesystem(absolute);
  if (onVirtual) return `is on ${onVirtual}, a virtual filesystem`;
  const denied = accessProblem(absolute, stat, fs.constants.R_OK | fs.constants.W_OK, 'the file');
  if (denied) return denied;
  const folderDenied = accessProblem(
    path.dirname(absolute),
    fs.statSync(path.dirname(absolute)),
    fs.constants.W_OK,
    'its folder',
  );
  if (folderDenied) return `${folderDenied} (SQLite creates its -wal file next to the database)`;
  return stat.size === 0 ? null : headerProblem(absolute, stat.size);
}

/** The nearest existing ancestor must be a writable folder on a real filesystem. */
function folderProblem(folder: string): string | null {
  let existing = folder;
  let stat = statOrNull(existing);
  while (stat === null && path.dirname(existing) !== existing) {
    existing = path.dirname(existing);
    stat = statOrNull(existing);
  }
  if (stat === null) return `cannot find any existing folder above it`;
  if (!stat.isDirectory()) return `cannot be created: '${existing}' is not a folder`;
  const onVirtual = virtualFilesystem(existing);
  if (onVirtual) return `cannot be created: '${existing}' is on ${onVirtual}, a virtual filesystem`;
  return accessProblem(existing, stat, fs.constants.W_OK, `its folder '${existing}'`);
}

function accessProblem(target: string, stat: fs.Stats, mode: number, what: string): string | null {
  if ((mode & fs.constants.W_OK) !== 0 && (stat.mode & 0o222) === 0) {
    return `${what} is read-only (mode ${(stat.mode & 0o777).toString(8).padStart(4, '0')})`;
  }
  try {
    fs.accessSync(target, mode);
    return null;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'EROFS'
      ? `${what} is on a read-only filesystem`
      : `${what} cannot be ${mode & fs.constants.R_OK ? 'read and ' : ''}written (${code})`;
  }
}

/** A non-empty file must start with the SQLite header and hold every page it announces. */
function headerProblem(file: string, size: number): string | null {
  const header = Buffer.alloc(HEADER_BYTES);
  const fd = fs.openSync(file, 'r');
  try {
    fs.readSync(fd, header, 0, HEADER_BYTES, 0);
  } finally {
    fs.closeSync(fd);
  }
  if (header.toString('latin1', 0, MAGIC.length) !== MAGIC) return 'is not a SQLite database (no SQLite header)';
  if (size < HEADER_BYTES) return `is truncated (${size} bytes, less than the SQLite header)`;
  const pageSizeField = header.readUInt16BE(16);
  const pageSize = pageSizeField === 1 ? 65_536 : pageSizeField;
  const pageCount = header.readUInt32BE(28);
  // The page count is only valid when "version-valid-for" equals the change counter.
  const countValid = header.readUInt32BE(92) === header.readUInt32BE(24);
  if (countValid && pageCount > 0 && size < pageCount * pageSize) {
    return `is truncated (${size} bytes; its header announces ${pageCount} pages of ${pageSize} bytes)`;
  }
  return null;
}

/** The path's stat, or null when nothing is there; a path through a file (ENOTDIR) is missing too. */
function statOrNull(target: string): fs.Stats | null {
  try {
    return fs.statSync(target, { throwIfNoEntry: false }) ?? null;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw error;
  }
}

function virtualFilesystem(target: string): string | undefined {
  return VIRTUAL_FILESYSTEMS[fs.statfsSync(target).type];
}

/**
 * Create the database's folder one level at a time. `mkdirSync({ recursive: true })` loops
 * forever at 100% CPU under `/proc` (mkdir there fails with ENOENT, which it takes for a
 * missing parent); here the first failure ends the walk.
 */
export function createFolder(folder: string): void {
  const missing: string[] = [];
  for (let dir = path.resolve(folder); statOrNull(dir) === null && path.dirname(dir) !== dir; dir = path.dirname(dir))
    missing.unshift(dir);
  for (const dir of missing) fs.mkdirSync(dir);
}
