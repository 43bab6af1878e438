import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// GET /admin/backup: an online backup of the exclusively held SQLite file, under write load.
const TOKEN = 'backup-token-0123456789';
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});

/** One request on a fresh connection; the body as bytes. */
function send(
  url: string,
  method: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.setTimeout(20_000, () => req.destroy(new Error(`no answer to ${method} ${url}`)));
    req.on('error', reject);
    req.end();
  });
}

const auth = { authorization: `Bearer ${TOKEN}` };
const LANES = 4;
const MAX_PER_LANE = 400; // bounded load

/** Failures on circuit `lane-<i>` back to back; `acked[i]` counts the ones answered 200. */
function writeLoad(url: string) {
  const acked = Array<number>(LANES).fill(0);
  let stopped = false;
  const lanes = Array.from({ length: LANES }, async (_, i) => {
    for (let n = 0; n < MAX_PER_LANE && !stopped; n++) {
      const answer = await send(`${url}/circuits/lane-${i}/failure`, 'POST', auth);
      expect(answer.status).toBe(200);
      acked[i]!++;
    }
  });
  return { acked, stop: async () => ((stopped = true), await Promise.all(lanes)) };
}

/** The failure count per load circuit in a database file. */
function counts(file: string): { integrity: string; counts: number[] } {
  const db = new Database(file, { readonly: true });
  try {
    const integrity = db.pragma('integrity_check', { simple: true }) as string;
    const get = db.prepare('SELECT failure_count FROM circuits WHERE name = ?').pluck();
    return {
      integrity,
      counts: Array.from({ length: LANES }, (_, i) => (get.get(`lane-${i}`) as number | undefined) ?? 0),
    };
  } finally {
    db.close();
  }
}

describe('GET /admin/backup', () => {
  for (const workers of [1, 2]) {
    it(`copies the live database under write load: the copy opens, is intact and holds every acknowledged write (${workers} worker(s))`, async () => {
      const dir = tempDir();
      fs.writeFileSync(path.join(dir, 'c.yaml'), 'circuit_defaults:\n  failure_threshold: 1000000\n');
      const env = {
        CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
        CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
        CIRCUITLOG_TOKEN: TOKEN,
        CIRCUITLOG_WORKERS: String(workers),
      };
      const server = await startServer(env, { detached: true });
      running.push(server);
      const load = writeLoad(server.url);
      while (load.acked.some((n) => n < 20)) await new Promise((r) => setTimeout(r, 10));

      const before = [...load.acked]; // acknowledged before the backup was asked for
      const backup = await send(`${server.url}/admin/backup`, 'GET', auth);
      const after = [...load.acked];
      await load.stop();
      expect(backup.status).toBe(200);
      expect(backup.headers['content-type']).toBe('application/vnd.sqlite3');
      expect(backup.headers['content-disposition']).toMatch(/^attachment; filename="circuitlog-.*\.db"$/);
      expect(Number(backup.headers['content-length'])).toBe(backup.body.length);
      const file = path.join(tempDir(), 'copy.db');
      fs.writeFileSync(file, backup.body);
      const copy = counts(file);
      expect(copy.integrity).toBe('ok');
      for (let i = 0; i < LANES; i++) {
        expect(copy.counts[i]).toBeGreaterThanOrEqual(before[i]!);
        expect(copy.counts[i]).toBeLessThanOrEqual(after[i]! + 1); // + the one in flight as the copy was taken
      }
      // Quiet now: a second copy is exactly the state the API reports.
      const quiet = await send(`${server.url}/admin/backup`, 'GET', auth);
      fs.writeFileSync(file, quiet.body);
      expect(counts(file).counts).toEqual(load.acked);
      expect(fs.readdirSync(dir).filter((f) => f.startsWith('.circuitlog-backup-'))).toEqual([]); // no copy left behind
    }, 90_000);
  }

  it('needs the token, and is off (403 admin-disabled) when no token is set', async () => {
    const dir = tempDir();
    const withToken = await startServer(
      { CIRCUITLOG_DB: path.join(dir, 'a.sqlite'), CIRCUITLOG_TOKEN: TOKEN },
      { detached: true },
    );
    running.push(withToken);
    const refused = await send(`${withToken.url}/admin/backup`, 'GET');
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body.toString()).code).toBe('UNAUTHORIZED');
    const head = await send(`${withToken.url}/admin/backup`, 'HEAD', auth); // answered without taking a copy
    expect([head.status, head.headers['content-type'], head.body.length]).toEqual([200, 'application/vnd.sqlite3', 0]);
    const open = await startServer({ CIRCUITLOG_DB: path.join(dir, 'b.sqlite') }, { detached: true });
    running.push(open);
    const off = await send(`${open.url}/admin/backup`, 'GET');
    expect(off.status).toBe(403);
    expect(off.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(off.body.toString())).toMatchObject({ code: 'ADMIN_DISABLED', type: '/problems/admin-disabled' });
  });

  for (const workers of [1, 2]) {
    it(`runs one backup at a time, until its download ends: others get 409 backup-running with Retry-After, no second copy (${workers} worker(s))`, async () => {
      const dir = tempDir();
      const env = { ...paddedDatabase(dir), CIRCUITLOG_TOKEN: TOKEN, CIRCUITLOG_WORKERS: String(workers) };
      const server = await startServer(env, { detached: true });
      running.push(server);
      const held = await holdDownload(`${server.url}/admin/backup`);
      expect(held.status).toBe(200);
      expect(backupFolders(dir)).toHaveLength(1); // the one copy, still being sent

      // Fresh connections: with 2 workers node:cluster spreads them over both.
      const others = await Promise.all(
        Array.from({ length: 4 }, () => send(`${server.url}/admin/backup`, 'GET', auth)),
      );
      for (const other of others) {
        expect([other.status, other.headers['content-type'], other.headers['retry-after']]).toEqual([
          409,
          'application/problem+json',
          '5',
        ]);
        expect(JSON.parse(other.body.toString())).toMatchObject({
          code: 'BACKUP_RUNNING',
          type: '/problems/backup-running',
        });
      }
      expect(backupFolders(dir)).toHaveLength(1);

      expect(await held.finish()).toBe(Number(held.headers['content-length'])); // the whole file
      expect(backupFolders(dir)).toEqual([]); // gone before the download's last bytes arrived
      const next = await send(`${server.url}/admin/backup`, 'GET', auth);
      expect(next.status).toBe(200);
    }, 90_000);
  }

  it('removes at start the partial copies interrupted backups left next to the database (this and older versions), and nothing else', async () => {
    const dir = tempDir();
    const env = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_TOKEN: TOKEN };
    const leftovers = ['.circuitlog-backup-db.sqlite', '.circuitlog-backup-Ab12Cd']; // this version's, fs.mkdtemp's before
    for (const name of leftovers) {
      fs.mkdirSync(path.join(dir, name));
      fs.writeFileSync(path.join(dir, name, 'backup.db'), 'SQLite format 3\0 cut short');
    }
    fs.writeFileSync(path.join(dir, leftovers[0]!, 'owner'), '999999999');
    fs.mkdirSync(path.join(dir, '.circuitlog-backup-other.sqlite')); // another database's: not ours to remove

    const server = await startServer(env, { detached: true });
    running.push(server);

    expect(backupFolders(dir)).toEqual(['.circuitlog-backup-other.sqlite']);
    const removed = server.logs.filter((l) => l.event === 'backup_leftover_removed');
    expect(removed.map((l) => path.basename(String(l.path))).sort()).toEqual([...leftovers].sort());
    expect((await send(`${server.url}/admin/backup`, 'GET', auth)).status).toBe(200);
  }, 90_000);

  it('leaves only its backup folder when killed (kill -9) during a download, and the next start removes it', async () => {
    const dir = tempDir();
    const env = { ...paddedDatabase(dir), CIRCUITLOG_TOKEN: TOKEN };
    const first = await startServer(env, { detached: true });
    running.push(first);
    const held = await holdDownload(`${first.url}/admin/backup`);
    expect(held.status).toBe(200);
    await first.killGroup();
    held.abort();
    expect(backupFolders(dir)).toEqual(['.circuitlog-backup-db.sqlite']);

    const second = await startServer(env, { detached: true });
    running.push(second);

    expect(backupFolders(dir)).toEqual([]);
    expect((await send(`${second.url}/admin/backup`, 'GET', auth)).status).toBe(200);
  }, 90_000);
});

/**
 * A database of some 24 MiB (a pad table beside the service's own), so that a download that is
 * not read stays open: far more than the socket buffers between server and client hold.
 */
function paddedDatabase(dir: string): { CIRCUITLOG_DB: string } {
  const file = path.join(dir, 'db.sqlite');
  const db = new Database(file);
  db.exec('CREATE TABLE pad (x BLOB)');
  const insert = db.prepare('INSERT INTO pad VALUES (randomblob(1048576))');
  db.transaction(() => {
    for (let i = 0; i < 24; i++) insert.run();
  })();
  db.close();
  return { CIRCUITLOG_DB: file };
}

/** The backup folders next to the database. */
function backupFolders(dir: string): string[] {
  return fs.readdirSync(dir).filter((f) => f.startsWith('.circuitlog-backup-'));
}

/** A backup whose download is held (not read) until `finish()`, which reads the rest and answers the bytes. */
function holdDownload(url: string): Promise<{
  status: number;
  headers: http.IncomingHttpHeaders;
  finish(): Promise<number>;
  abort(): void;
}> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { agent: false, headers: auth }, (res) => {
      res.pause();
      res.on('error', () => undefined); // a killed server's reset: finish() reports it
      let bytes = 0;
      const finish = () =>
        new Promise<number>((done, failed) => {
          res.on('data', (chunk: Buffer) => (bytes += chunk.length));
          res.on('end', () => done(bytes));
          res.on('error', failed);
          res.resume();
        });
      resolve({ status: res.statusCode ?? 0, headers: res.headers, finish, abort: () => req.destroy() });
    });
    req.on('error', reject);
    req.end();
  });
}
