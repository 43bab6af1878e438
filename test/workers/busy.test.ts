import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { buildApp } from '../helper.js';
import { tempDir } from '../server-process.js';

describe('a database locked by another process', () => {
  it('answers 503 STORAGE_BUSY with Retry-After, never a 500, and reads keep working', async () => {
    const file = path.join(tempDir(), 'db.sqlite');
    const db = openDatabase(file, { busyTimeoutMs: 50 }); // 50 ms instead of 5 s, to keep the test short
    migrate(db, readMigrations(defaultMigrationsDir()));
    const t = buildApp({ store: new SqliteCircuitStore(db) });
    await t.request('POST', '/circuits/svc/failure');

    const other = openDatabase(file);
    other.exec('BEGIN IMMEDIATE'); // another process holds the write lock
    try {
      const res = await t.request('POST', '/circuits/svc/outcomes', { success: false });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(await res.json()).toMatchObject({ code: 'STORAGE_BUSY', status: 503 });
      // WAL readers are not blocked by a writer.
      expect((await t.request('GET', '/circuits/svc')).status).toBe(200);
    } finally {
      other.exec('ROLLBACK');
    }
    expect(await (await t.request('POST', '/circuits/svc/outcomes', { success: false })).json()).toMatchObject({
      failure_count: 2,
    });
  });
});
