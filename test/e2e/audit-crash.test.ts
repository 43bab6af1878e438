import fs from 'node:fs';
import path from 'node:path';
import { SqliteAuditTable } from '../../src/store/sqlite/audit-table.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const TOKEN = 'audit-crash-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
const running: ServerProcess[] = [];
let redis: RedisServer | undefined;
beforeAll(async () => {
  redis = await startRedis();
}, 60_000);
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop('SIGKILL')));
});
afterAll(async () => {
  await redis?.stop('SIGKILL');
});

async function start(env: Record<string, string>) {
  const server = await startServer({ CIRCUITLOG_TOKEN: TOKEN, ...env });
  running.push(server);
  return server;
}

const send = (url: string, method: string, body?: unknown) =>
  fetch(url, {
    method,
    headers: body === undefined ? auth : { ...auth, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

/** The actions of the audit log, each acknowledged (2xx) before the next; what each should leave. */
async function act(url: string, withBackup: boolean): Promise<string[]> {
  const done: string[] = [];
  const expectOk = async (res: Response, action: string, circuit: string | null) => {
    expect(res.status, `${action} ${circuit}`).toBeLessThan(300);
    await res.arrayBuffer();
    done.push(`${action}:${circuit}`);
  };
  await expectOk(await send(`${url}/circuits/pay`, 'PATCH', { failure_threshold: 3 }), 'circuit_created', 'pay');
  await expectOk(await send(`${url}/circuits/pay`, 'PATCH', { timeout_seconds: 45 }), 'policy_changed', 'pay');
  await expectOk(await send(`${url}/circuits/pay`, 'PATCH', { forced_state: 'open' }), 'forced_open', 'pay');
  await expectOk(await send(`${url}/circuits/pay`, 'PATCH', { forced_state: null }), 'force_cleared', 'pay');
  for (let i = 0; i < 3; i++) await (await send(`${url}/circuits/pay/failure`, 'POST')).arrayBuffer(); // opens it; not audited
  await expectOk(await send(`${url}/circuits/pay/reset`, 'POST'), 'manual_reset', 'pay');
  await expectOk(await send(`${url}/circuits/old`, 'PATCH', {}), 'circuit_created', 'old');
  await expectOk(await send(`${url}/circuits/old`, 'DELETE'), 'circuit_deleted', 'old');
  if (withBackup) await expectOk(await send(`${url}/admin/backup`, 'GET'), 'backup', null);
  return done.reverse(); // newest first, as GET /audit answers
}

async function audit(url: string) {
  const res = await send(`${url}/audit?limit=1000`, 'GET');
  expect(res.status).toBe(200);
  return ((await res.json()) as { entries: Record<string, unknown>[] }).entries;
}

describe('the audit log of a real server', () => {
  it('on SQLite: every acknowledged action has its entry after a kill -9 and a restart', async () => {
    const db = path.join(tempDir(), 'audit.db');
    const first = await start({ CIRCUITLOG_DB: db });
    const expected = await act(first.url, true);
    expect(await first.stop('SIGKILL')).toBe(null); // at once after the last answer
    const second = await start({ CIRCUITLOG_DB: db });
    const entries = await audit(second.url);
    expect(entries.map((e) => `${e.action}:${e.circuit}`)).toEqual(expected);
    expect(entries.every((e) => e.who === 'token' && e.remote === '127.0.0.1')).toBe(true);
    const events = (await (await send(`${second.url}/circuits/pay/events`, 'GET')).json()) as {
      events: { reason: string; by?: string }[];
    };
    expect(events.events.filter((e) => e.by !== undefined).map((e) => `${e.reason}:${e.by}`)).toEqual([
      'manual_reset:token',
      'force_cleared:token',
      'forced_open:token',
    ]);
  });

  it('on Redis: every acknowledged action has its entry after a kill -9 and a restart', async () => {
    const store = redis!.url();
    const first = await start({ CIRCUITLOG_STORE: store });
    const expected = await act(first.url, false);
    expect(await first.stop('SIGKILL')).toBe(null);
    const second = await start({ CIRCUITLOG_STORE: store });
    const entries = await audit(second.url);
    expect(entries.map((e) => `${e.action}:${e.circuit}`)).toEqual(expected);
    expect(entries.every((e) => e.who === 'token' && e.remote === '127.0.0.1')).toBe(true);
  });

  it('deletes entries past audit.retention_days of the config file, at the first sweep', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'audit.db');
    const handle = openDatabase(db);
    migrate(handle, readMigrations(defaultMigrationsDir()));
    const table = new SqliteAuditTable(handle);
    const daysAgo = (days: number) => Date.now() - days * 86_400_000;
    const young = daysAgo(20);
    const entry = { who: 'ops', action: 'backup' as const, circuit: null, before: null, after: null };
    table.append({ ...entry, at: daysAgo(40), requestId: null, remote: null });
    table.append({ ...entry, at: young, requestId: null, remote: null });
    handle.close();
    const config = path.join(dir, 'circuitlog.yaml');
    fs.writeFileSync(config, 'audit:\n  retention_days: 30\n');
    const server = await start({ CIRCUITLOG_DB: db, CIRCUITLOG_CONFIG: config });
    // The sweep at start logs what it deleted: wait for that line (an event, bounded at 10 s).
    const deadline = Date.now() + 10_000;
    while (!server.logs.some((l) => l.event === 'housekeeping') && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(server.logs.find((l) => l.event === 'housekeeping')).toMatchObject({ audit_trimmed: 1, trimmed_by_age: 0 });
    expect((await audit(server.url)).map((e) => e.at)).toEqual([new Date(young).toISOString()]);
  });
});
