// Issue 27 item 9: a database written before migration 0008 (the caller table as the circuits
// row's `callers` JSON) opened by the real server: the migration moves every entry into
// caller_entries, and the server goes on from them (an isolated caller stays isolated, the
// others are not) and writes the next entry as a row of its own.
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { requestJson } from '../fresh-request.js';

const HOUR_MS = 3_600_000;

describe('a caller table stored before migration 0008', () => {
  let server: ServerProcess | undefined;
  let file: string;
  let isolatedUntil: number;
  beforeAll(async () => {
    file = path.join(tempDir(), 'db.sqlite');
    const db = openDatabase(file);
    migrate(
      db,
      readMigrations(defaultMigrationsDir()).filter((m) => m.version < 8),
    );
    const now = Date.now();
    isolatedUntil = now + HOUR_MS;
    const callers = [
      ['dc1/host-1', 1, now - 1_000, null, null, 0, null],
      ['dc1/bad', 5, now - 500, null, isolatedUntil, 3_600, null],
      ['dc2/host-3', 2, now - 100, null, null, 0, null],
    ];
    db.prepare(
      `INSERT INTO circuits (name, state, failure_count, failure_threshold, timeout_seconds, half_open_max_calls,
        probe_leases, created_at, updated_at, quorum_policy, callers) VALUES (?, 'closed', 3, 5, 30, 1, '[]', ?, ?, ?, ?)`,
    ).run(
      'upgraded',
      now,
      now,
      JSON.stringify({ minCallers: 2, windowSeconds: 3_600, maxCallers: 1_000 }),
      JSON.stringify(callers),
    );
    db.close();
    server = await startServer({ CIRCUITLOG_DB: file });
  });
  afterAll(async () => {
    await server?.stop('SIGKILL');
  });

  it('keeps every entry: the isolated caller is still refused, the others allowed, and the next failure is one more row', async () => {
    const url = `${server!.url}/circuits/upgraded`;
    const shown = (await requestJson(url)).json;
    expect(shown.isolated_callers).toEqual([
      { caller: 'dc1/bad', failures: 5, open_until: new Date(isolatedUntil).toISOString(), probe_until: null },
    ]);
    const refused = await requestJson(`${url}/allowed?caller=dc1/bad`);
    expect(refused.status).toBe(503);
    expect(refused.json).toMatchObject({ code: 'CIRCUIT_OPEN', scope: 'caller', caller: 'dc1/bad' });
    expect((await requestJson(`${url}/allowed?caller=dc1/host-1`)).status).toBe(200);
    const failed = await requestJson(`${url}/outcomes`, 'POST', { success: false, caller: 'dc2/host-4' });
    expect(failed.status).toBe(200);
    await server!.stop('SIGTERM');
    server = undefined;
    const db = openDatabase(file);
    try {
      const rows = db.prepare('SELECT caller, failures FROM caller_entries ORDER BY seq').raw().all();
      expect(rows).toEqual([
        ['dc1/host-1', 1],
        ['dc1/bad', 5],
        ['dc2/host-3', 2],
        ['dc2/host-4', 1],
      ]);
      const columns = db.prepare("SELECT name FROM pragma_table_info('circuits')").pluck().all();
      expect(columns).not.toContain('callers');
    } finally {
      db.close();
    }
  });
});
