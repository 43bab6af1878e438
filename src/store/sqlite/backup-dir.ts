import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';

/** What the folders a backup is taken in start with (docs/operations.md#backup). */
export const BACKUP_DIR_PREFIX = '.circuitlog-backup-';
const OWNER_FILE = 'owner'; // the pid of the process taking the backup
const LEGACY_DIR = /^\.circuitlog-backup-[A-Za-z0-9]{6}$/; // fs.mkdtemp's, before the lock had a fixed name

/**
 * The folder a backup of `dbPath` is copied into while it is taken and sent: next to the
 * database (same filesystem), named after it, so that its existence is the lock that lets one
 * backup run at a time across every process on the file.
 */
export function backupDirOf(dbPath: string): string {
  const file = path.resolve(dbPath);
  return path.join(path.dirname(file), `${BACKUP_DIR_PREFIX}${path.basename(file)}`);
}

/**
 * Take the backup folder `dir` for this process: true when taken, false while another backup
 * holds it. A folder whose owner process is gone (killed during a backup) is taken over.
 */
export async function takeBackupDir(dir: string): Promise<boolean> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await fsp.mkdir(dir); // atomic: exactly one of several processes creates it
      await fsp.writeFile(path.join(dir, OWNER_FILE), String(process.pid));
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (!(await ownerGone(dir))) return false;
      // Moved aside first, so that two processes taking it over cannot remove each other's.
      const aside = `${dir}.stale-${process.pid}`;
      await fsp.rename(dir, aside).catch(() => undefined);
      await fsp.rm(aside, { recursive: true, force: true });
    }
  }
  return false;
}

/**
 * Remove the backup folder (the copy in it goes once the last open handle on it closes).
 * Synchronous (two names): done before the answer's last bytes can reach the client, so a
 * backup asked for right after one ended never meets the lock.
 */
export function releaseBackupDir(dir: string): void {
  fs.rmSync(dir, { recursive: true, force: true });
}

/** True when the folder names an owner process that no longer runs (a folder without one is being taken). */
async function ownerGone(dir: string): Promise<boolean> {
  const owner = Number(await fsp.readFile(path.join(dir, OWNER_FILE), 'utf8').catch(() => ''));
  if (!Number.isSafeInteger(owner) || owner <= 0) return false;
  if (owner === process.pid) return false;
  try {
    process.kill(owner, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * At start, before any process serves the file: remove what a backup killed part-way (`kill
 * -9`, a power cut) left next to `dbPath`: its folder (and one moved aside), and the
 * `mkdtemp` folders of versions before this one. Answers the paths removed.
 */
export function removeBackupLeftovers(dbPath: string): string[] {
  const own = backupDirOf(dbPath);
  const folder = path.dirname(own);
  let names: string[];
  try {
    names = fs.readdirSync(folder);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const full = path.join(folder, name);
    const ours = full === own || full.startsWith(`${own}.stale-`) || (LEGACY_DIR.test(name) && legacyCopy(full));
    if (!ours) continue;
    fs.rmSync(full, { recursive: true, force: true });
    removed.push(full);
  }
  return removed;
}

/** A folder of the old layout: holds nothing but the copy `backup.db`. */
function legacyCopy(dir: string): boolean {
  try {
    return fs.readdirSync(dir).every((f) => f === 'backup.db');
  } catch {
    return false;
  }
}
