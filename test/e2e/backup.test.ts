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
});
