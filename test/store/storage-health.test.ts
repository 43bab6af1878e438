import fs from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { SqliteCircuitStore, StorageHealth } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { buildApp } from '../helper.js';
import { tempDir } from '../server-process.js';

/** The app on a database file, its store watched by StorageHealth; `free` is the disk's free space. */
function appOnFile() {
  const file = path.join(tempDir(), 'db.sqlite');
  const db = openDatabase(file);
  migrate(db, readMigrations(defaultMigrationsDir()));
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const disk = { free: 1e9 };
  const store = new StorageHealth(file, logger, () => disk.free).wrap(new SqliteCircuitStore(db, true));
  const t = buildApp({ store, health: async () => store.health() });
  return { ...t, db, file, disk, lines };
}

describe('a full disk', () => {
  // SQLite's max_page_count makes it answer SQLITE_FULL exactly as a full disk does.
  it('answers writes with 503 storage-full and Retry-After, and /health is degraded until there is room', async () => {
    const t = appOnFile();
    expect((await t.request('POST', '/circuits/before/failure')).status).toBe(200);
    const pages = t.db.pragma('page_count', { simple: true }) as number;
    t.db.pragma(`max_page_count = ${pages}`);
    t.disk.free = 0;
    let res: Response | undefined;
    for (let i = 0; i < 200 && (res === undefined || res.status === 200); i++) {
      res = await t.request('POST', `/circuits/${'n'.repeat(150)}-${i}/failure`);
    }
    expect(res!.status).toBe(503);
    expect(res!.headers.get('retry-after')).toBe('10');
    expect(await res!.json()).toMatchObject({ code: 'STORAGE_FULL', type: '/problems/storage-full' });
    const health = await t.request('GET', '/health');
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: 'degraded', storage: 'full' });
    expect(t.lines.filter((l) => l.event === 'storage_full')).toHaveLength(1);
    // Reads keep working.
    expect((await t.request('GET', '/circuits/before')).status).toBe(200);

    // Room again, without a restart.
    t.db.pragma('max_page_count = 1000000');
    t.disk.free = 1e9;
    expect((await t.request('GET', '/health')).status).toBe(200);
    expect((await t.request('POST', '/circuits/after/failure')).status).toBe(200);
    expect(t.lines.filter((l) => l.event === 'storage_recovered')).toHaveLength(1);
  });

  it('clears the degraded state as soon as a write commits again', async () => {
    const t = appOnFile();
    t.db.pragma(`max_page_count = ${t.db.pragma('page_count', { simple: true }) as number}`);
    t.disk.free = 0;
    let status = 200;
    for (let i = 0; i < 200 && status === 200; i++)
      status = (await t.request('POST', `/circuits/${'n'.repeat(150)}-${i}/failure`)).status;
    expect(status).toBe(503);
    t.db.pragma('max_page_count = 1000000');
    expect((await t.request('POST', '/circuits/after/failure')).status).toBe(200);
    expect((await t.request('GET', '/health')).status).toBe(200);
  });
});

describe('the database file deleted while running', () => {
  it('fails /health, logs an error once, and refuses writes instead of acknowledging them', async () => {
    const t = appOnFile();
    expect((await t.request('POST', '/circuits/svc/failure')).status).toBe(200);
    fs.unlinkSync(t.file);
    const write = await t.request('POST', '/circuits/svc/failure');
    expect(write.status).toBe(503);
    expect(await write.json()).toMatchObject({ code: 'STORAGE_UNAVAILABLE', type: '/problems/storage-unavailable' });
    const health = await t.request('GET', '/health');
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ status: 'failed', storage: 'deleted' });
    expect(t.lines.filter((l) => l.event === 'storage_lost')).toEqual([
      expect.objectContaining({ level: 50, reason: 'deleted' }),
    ]);
  });

  it('notices a file replaced by another one', async () => {
    const t = appOnFile();
    fs.renameSync(t.file, `${t.file}.old`);
    fs.writeFileSync(t.file, '');
    expect(await (await t.request('GET', '/health')).json()).toMatchObject({ status: 'failed', storage: 'replaced' });
    expect((await t.request('POST', '/circuits/svc/failure')).status).toBe(503);
  });

  it('refuses a batch of outcomes, a PATCH and a DELETE too, writing nothing', async () => {
    const t = appOnFile();
    await t.request('POST', '/circuits/svc/failure');
    fs.unlinkSync(t.file);
    const batch = await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'svc', success: false }] });
    expect(batch.status).toBe(503);
    expect((await t.request('PATCH', '/circuits/svc', { failure_threshold: 9 })).status).toBe(503);
    expect((await t.request('DELETE', '/circuits/svc')).status).toBe(503);
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({
      failure_count: 1,
      failure_threshold: 5,
    });
  });

  it('still answers calls that write nothing', async () => {
    const t = appOnFile();
    await t.request('POST', '/circuits/svc/failure');
    fs.unlinkSync(t.file);
    // A check on a closed circuit writes nothing, so it is answered from what was read.
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
  });
});
