import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { runCli } from './run-cli.js';

// backup, restore and migrate --check against real server processes on temp databases.
const TOKEN = 'cli-db-token-0123456789';
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

async function serve(db: string, workers = 1): Promise<ServerProcess> {
  const server = await startServer(
    { CIRCUITLOG_DB: db, CIRCUITLOG_TOKEN: TOKEN, CIRCUITLOG_WORKERS: String(workers) },
    { detached: true },
  );
  running.push(server);
  return server;
}

async function stop(server: ServerProcess): Promise<void> {
  await server.stop();
  running.splice(running.indexOf(server), 1);
}

async function fail(server: ServerProcess, name: string, times = 1): Promise<void> {
  for (let i = 0; i < times; i++) {
    const answer = await fetch(`${server.url}/circuits/${name}/failure`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(answer.status).toBe(200);
  }
}

/** Failure counts by circuit name in a database file. */
function countsIn(file: string): Record<string, number> {
  const db = new Database(file, { readonly: true });
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    const rows = db.prepare('SELECT name, failure_count FROM circuits').all() as {
      name: string;
      failure_count: number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.name, r.failure_count]));
  } finally {
    db.close();
  }
}

const apiEnv = (server: ServerProcess) => ({ CIRCUITLOG_URL: server.url, CIRCUITLOG_TOKEN: TOKEN });

describe('circuitlog backup', () => {
  for (const workers of [1, 2]) {
    it(`takes an online backup through the server, with a progress line (${workers} worker(s))`, async () => {
      const dir = tempDir();
      const server = await serve(path.join(dir, 'db.sqlite'), workers);
      await fail(server, 'backed-up', 3);
      const out = path.join(dir, 'copy.db');
      const run = await runCli(['backup', out], apiEnv(server));
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toBe(`${out}\n`);
      expect(run.stderr).toMatch(new RegExp(`^backup: [\\d.]+ KiB written to ${out}\\n$`));
      expect(countsIn(out)).toMatchObject({ 'backed-up': 3 });
      expect(fs.readdirSync(dir).filter((f) => f.endsWith('.part'))).toEqual([]);
    });
  }

  it('refuses to replace an existing file unless --overwrite', async () => {
    const dir = tempDir();
    const server = await serve(path.join(dir, 'db.sqlite'));
    const out = path.join(dir, 'copy.db');
    fs.writeFileSync(out, 'keep me');
    const refused = await runCli(['backup', out], apiEnv(server));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('pass --overwrite');
    expect(fs.readFileSync(out, 'utf8')).toBe('keep me');
    const json = await runCli(['backup', out, '--overwrite', '--json'], apiEnv(server));
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ file: out, source: server.url, bytes: fs.statSync(out).size });
  });

  it('waits while another backup runs (409, 429 or 503 storage-busy with Retry-After), then saves it', async () => {
    const dir = tempDir();
    const source = path.join(dir, 'source.db');
    new Database(source).exec('CREATE TABLE t (x); INSERT INTO t VALUES (42)').close();
    const busy = [
      { status: 503, body: { code: 'STORAGE_BUSY', detail: 'A backup is already being taken' } },
      { status: 409, body: { code: 'BACKUP_RUNNING', detail: 'A backup is already being taken' } },
      { status: 429, body: { code: 'BACKUP_RUNNING', detail: 'A backup is already being taken' } },
    ];
    const seen: string[] = [];
    const fake = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers.authorization}`);
      const next = busy.shift();
      if (next) {
        res.writeHead(next.status, { 'content-type': 'application/problem+json', 'retry-after': '0' });
        res.end(JSON.stringify(next.body));
        return;
      }
      const bytes = fs.readFileSync(source);
      res.writeHead(200, { 'content-type': 'application/vnd.sqlite3', 'content-length': bytes.length });
      res.end(bytes);
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
      const out = path.join(dir, 'copy.db');
      const run = await runCli(['backup', out, '--url', url, '--token', TOKEN]);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr.match(/another backup is running; retrying in 0 s/g)).toHaveLength(3);
      expect(seen).toEqual(Array(4).fill(`GET /admin/backup Bearer ${TOKEN}`));
      expect(fs.readFileSync(out).equals(fs.readFileSync(source))).toBe(true);
    } finally {
      await new Promise((resolve) => fake.close(resolve));
    }
  });

  it('gives up with exit 1 once --wait is spent, and writes nothing', async () => {
    const fake = http.createServer((_req, res) => {
      res.writeHead(409, { 'content-type': 'application/problem+json', 'retry-after': '5' });
      res.end(JSON.stringify({ detail: 'A backup is already being taken' }));
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
      const out = path.join(tempDir(), 'copy.db');
      const run = await runCli(['backup', out, '--url', url, '--wait', '0']);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain('another backup is still running');
      expect(fs.existsSync(out)).toBe(false);
    } finally {
      await new Promise((resolve) => fake.close(resolve));
    }
  });

  it('with --db copies the file while the server is down, and refuses while a server holds it', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'db.sqlite');
    const server = await serve(db);
    await fail(server, 'offline', 2);
    const out = path.join(dir, 'copy.db');
    const refused = await runCli(['backup', out, '--db', db]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`a running circuitlog holds '${db}'`);
    expect(fs.existsSync(out)).toBe(false);
    await stop(server);
    const run = await runCli(['backup', out, '--db', db]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/^backup: [\d.]+ KiB written to /);
    expect(countsIn(out)).toMatchObject({ offline: 2 });
  });

  it('--offline takes the database the server would use (CIRCUITLOG_DB)', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'db.sqlite');
    const server = await serve(db);
    await fail(server, 'from-env');
    await stop(server);
    const out = path.join(dir, 'copy.db');
    const run = await runCli(['backup', out, '--offline'], { CIRCUITLOG_DB: db });
    expect(run.code, run.stderr).toBe(0);
    expect(countsIn(out)).toMatchObject({ 'from-env': 1 });
  });
});

describe('circuitlog restore', () => {
  for (const workers of [1, 2]) {
    it(`refuses while a server holds the database (${workers} worker(s)), and restores once it stopped`, async () => {
      const dir = tempDir();
      const db = path.join(dir, 'db.sqlite');
      let server = await serve(db, workers);
      await fail(server, 'kept', 2);
      const copy = path.join(dir, 'copy.db');
      expect((await runCli(['backup', copy], apiEnv(server))).code).toBe(0);
      await fail(server, 'after-backup');
      const refused = await runCli(['restore', copy, '--db', db]);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(`a running circuitlog holds '${db}'; stop it before restoring`);
      await fail(server, 'still-serving'); // the refusal changed nothing under the server
      await stop(server);
      expect(countsIn(db)).toMatchObject({ 'after-backup': 1, 'still-serving': 1 });

      const restored = await runCli(['restore', copy, '--db', db, '--json']);
      expect(restored.code, restored.stderr).toBe(0);
      const kept = (JSON.parse(restored.stdout) as { kept: string }).kept;
      expect(countsIn(kept)).toMatchObject({ 'after-backup': 1 });
      server = await serve(db, workers);
      const listed = await runCli(['ls', '--json'], apiEnv(server));
      const names = (JSON.parse(listed.stdout) as { name: string; failure_count: number }[]).map((c) => [
        c.name,
        c.failure_count,
      ]);
      expect(names).toEqual([['kept', 2]]);
    });
  }

  it('refuses a file that is not an intact circuitlog database, and one newer than the build', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'db.sqlite');
    const server = await serve(db);
    await fail(server, 'untouched');
    await stop(server);
    const before = fs.readFileSync(db);
    const text = path.join(dir, 'notes.txt');
    fs.writeFileSync(text, 'not a database at all, just some words in a file of text');
    const other = path.join(dir, 'other.db');
    new Database(other).exec('CREATE TABLE t (x)').close();
    const newer = path.join(dir, 'newer.db');
    fs.copyFileSync(db, newer);
    new Database(newer).exec("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')").close();
    const cases: [string, string][] = [
      [text, 'is not a SQLite database'],
      [other, 'is not a circuitlog database'],
      [newer, 'schema version 9999, newer than this build'],
      [path.join(dir, 'missing.db'), 'no database at'],
    ];
    for (const [file, says] of cases) {
      const run = await runCli(['restore', file, '--db', db]);
      expect(run.code, file).toBe(1);
      expect(run.stderr, file).toContain(says);
    }
    expect(fs.readFileSync(db).equals(before)).toBe(true);
  });
});

describe('circuitlog migrate --check', () => {
  it('exits 0 when the schema matches the build, 4 when migrations are pending, 5 when the database is newer', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'db.sqlite');
    await stop(await serve(db));
    const current = await runCli(['migrate', '--check', '--db', db, '--json']);
    expect(current.code, current.stderr).toBe(0);
    const report = JSON.parse(current.stdout) as { database_version: number; build_version: number; status: string };
    expect(report).toMatchObject({ status: 'current' });
    expect(report.database_version).toBe(report.build_version);

    const handle = new Database(db);
    handle.prepare('DELETE FROM schema_migrations WHERE version = ?').run(report.build_version);
    handle.close();
    const pending = await runCli(['migrate', '--check', '--db', db]);
    expect(pending.code).toBe(4);
    expect(pending.stdout).toContain(`schema version ${report.build_version - 1}`);
    expect(pending.stdout).toContain('1 migration(s) pending');

    const again = new Database(db);
    again.exec("INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 'now')");
    again.close();
    const newer = await runCli(['migrate', '--check'], { CIRCUITLOG_DB: db });
    expect(newer.code).toBe(5);
    expect(newer.stdout).toContain('newer than this build');
  });

  it('says so with exit 1 while a single server holds the file, and needs --check', async () => {
    const dir = tempDir();
    const db = path.join(dir, 'db.sqlite');
    await serve(db);
    const held = await runCli(['migrate', '--check', '--db', db]);
    expect(held.code).toBe(1);
    expect(held.stderr).toContain('held by a running circuitlog');
    const bare = await runCli(['migrate', '--db', db]);
    expect(bare.code).toBe(2);
  });
});

describe('circuitlog serve', () => {
  it('starts the service as npm start does, with --workers, and stops on SIGTERM', async () => {
    const dir = tempDir();
    const server = await startServer(
      { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_TOKEN: TOKEN },
      { detached: true, args: ['dist/cli.js', 'serve', '--workers', '2'] },
    );
    running.push(server);
    expect(server.logs.find((entry) => entry.event === 'starting')).toMatchObject({ workers: 2 });
    // A worker is forked from dist/cli.js with the primary's arguments, and serves too.
    const workers = server.logs.filter((entry) => entry.event === 'worker_listening').map((entry) => entry.pid);
    expect(workers.length).toBeGreaterThan(0);
    expect(workers).not.toContain(server.child.pid);
    await fail(server, 'served');
    const got = await runCli(['get', 'served', '--json'], apiEnv(server));
    expect(JSON.parse(got.stdout)).toMatchObject({ failure_count: 1 });
    expect(await server.stop()).toBe(0);
  });
});
