import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
const mounts: string[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop('SIGKILL')));
  for (const dir of mounts.splice(0)) execFileSync('umount', ['-l', dir]);
});

/** A small real filesystem of its own (tmpfs), so the test can fill it. Needs root, as in CI. */
function smallDisk(size: string): string {
  const dir = tempDir('circuitlog-disk-');
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { stdio: 'pipe' });
  } catch (error) {
    throw new Error(
      `this test mounts a tmpfs to fill a real disk and needs root (CI runs as root): ${(error as Error).message}`,
    );
  }
  mounts.push(dir);
  return dir;
}

/** Write until the filesystem says ENOSPC; returns the filler's path. */
function fill(dir: string): string {
  const filler = path.join(dir, 'filler');
  const fd = fs.openSync(filler, 'w');
  try {
    for (const chunk of [Buffer.alloc(64 * 1024), Buffer.alloc(512)]) {
      for (let i = 0; i < 1_000_000; i++) {
        try {
          fs.writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw error;
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return filler;
}

const post = (url: string) => fetch(url, { method: 'POST' });

/** Log lines arrive through a pipe: give them a moment (bounded). */
async function logged(server: ServerProcess, event: string): Promise<Record<string, unknown>[]> {
  for (let i = 0; i < 100 && !server.logs.some((l) => l.event === event); i++)
    await new Promise((r) => setTimeout(r, 20));
  return server.logs.filter((l) => l.event === event);
}

describe('storage faults on a real server', () => {
  it('answers 503 storage-full on a full disk, reports it on /health, and recovers without a restart', async () => {
    const disk = smallDisk('8m');
    const server = await startServer({ CIRCUITLOG_DB: path.join(disk, 'db.sqlite') });
    running.push(server);
    expect((await post(`${server.url}/circuits/before/failure`)).status).toBe(200);
    const filler = fill(disk);

    let res: Response | undefined;
    for (let i = 0; i < 2_000 && (res === undefined || res.status === 200); i++) {
      res = await post(`${server.url}/circuits/${'n'.repeat(150)}-${i}/failure`);
    }
    expect(res!.status).toBe(503);
    expect(res!.headers.get('retry-after')).toBe('10');
    expect(await res!.json()).toMatchObject({ code: 'STORAGE_FULL' });
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: 'degraded', storage: 'full' });
    expect(await logged(server, 'storage_full')).toHaveLength(1);

    fs.unlinkSync(filler);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
    expect((await post(`${server.url}/circuits/after/failure`)).status).toBe(200);
    expect(await (await fetch(`${server.url}/circuits/before`)).json()).toMatchObject({ failure_count: 1 });
  });

  it('refuses writes and fails /health once the database file is deleted', async () => {
    const db = path.join(tempDir(), 'db.sqlite');
    const server = await startServer({ CIRCUITLOG_DB: db });
    running.push(server);
    expect((await post(`${server.url}/circuits/svc/failure`)).status).toBe(200);
    fs.unlinkSync(db);
    const write = await post(`${server.url}/circuits/svc/failure`);
    expect(write.status).toBe(503);
    expect(await write.json()).toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
    expect((await fetch(`${server.url}/health`)).status).toBe(503);
    expect(await logged(server, 'storage_lost')).toEqual([expect.objectContaining({ level: 50, reason: 'deleted' })]);
  });
});
