import { createHash } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { refusedStart } from '../refused-start.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
const blockers: net.Server[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop('SIGKILL')));
  await Promise.all(blockers.splice(0).map((b) => new Promise((r) => b.close(r))));
});

/** Run the server expecting it to refuse to start, with its log at info (test/refused-start.ts). */
const refusal = (env: Record<string, string>) => refusedStart({ CIRCUITLOG_LOG_LEVEL: 'info', ...env });

/** A loopback port some other process already listens on. */
async function busyPort(): Promise<number> {
  const blocker = net.createServer();
  blockers.push(blocker);
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  return (blocker.address() as net.AddressInfo).port;
}

/** Hash and names of every file in a folder, to prove a refused start changed nothing. */
function snapshot(dir: string): Record<string, string> {
  return Object.fromEntries(
    fs.readdirSync(dir).map((name) => {
      const file = path.join(dir, name);
      const stat = fs.statSync(file);
      return [
        name,
        stat.isFile()
          ? createHash('sha256').update(fs.readFileSync(file)).digest('hex') + stat.mode.toString(8)
          : 'dir',
      ];
    }),
  );
}

/** A real, migrated database file (closed, so WAL is checkpointed into it). */
function realDatabase(file: string): void {
  const db = new Database(file);
  db.exec('CREATE TABLE t (x BLOB)');
  const insert = db.prepare('INSERT INTO t VALUES (randomblob(3000))');
  for (let i = 0; i < 20; i++) insert.run();
  db.close();
}

describe('start-up with a bad HOST or PORT', () => {
  it('names HOST or PORT, exits 2, and has not touched the database', async () => {
    const port = await busyPort();
    for (const workers of ['1', '2']) {
      const cases: [Record<string, string>, string][] = [
        [{ HOST: 'not_a_host' }, 'HOST: must be an IP address or a host name'],
        [{ HOST: '192.0.2.1' }, 'HOST: 192.0.2.1 is not an address of this machine'], // TEST-NET-1, never local
        [{ PORT: String(port) }, `PORT: 127.0.0.1:${port} is already in use`],
      ];
      for (const [env, message] of cases) {
        const dir = tempDir();
        const result = await refusal({
          CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
          CIRCUITLOG_WORKERS: workers,
          ...env,
        });
        expect(result.code).toBe(2);
        expect(result.stderr).toContain(`circuitlog: cannot start: ${message}`);
        expect(result.stderr.split('\n').filter(Boolean)).toHaveLength(1); // one line, no stack trace
        expect(fs.readdirSync(dir)).toEqual([]); // migrations never ran
      }
    }
  });
});

describe('start-up with a bad CIRCUITLOG_DB', () => {
  it('names CIRCUITLOG_DB and what is wrong, exits 2, and leaves the file untouched', async () => {
    const dir = tempDir();
    const folder = path.join(dir, 'folder.db');
    fs.mkdirSync(folder);
    const notDb = path.join(dir, 'notes.txt');
    fs.writeFileSync(notDb, 'hello, this is not a database\n'.repeat(10));
    const truncated = path.join(dir, 'truncated.db');
    realDatabase(truncated);
    fs.truncateSync(truncated, 8192);
    const corrupt = path.join(dir, 'corrupt.db');
    realDatabase(corrupt);
    const fd = fs.openSync(corrupt, 'r+');
    fs.writeSync(fd, Buffer.alloc(200, 0xab), 0, 200, 100); // the schema page, just past the header
    fs.closeSync(fd);
    const tiny = path.join(dir, 'tiny.db');
    fs.writeFileSync(tiny, 'SQLite format 3\0');
    const readOnly = path.join(dir, 'read-only.db');
    realDatabase(readOnly);
    fs.chmodSync(readOnly, 0o444);
    const roFolder = path.join(dir, 'ro-folder');
    fs.mkdirSync(roFolder);
    realDatabase(path.join(roFolder, 'db.sqlite'));
    fs.chmodSync(roFolder, 0o555);
    const cases: [string, string][] = [
      [folder, 'is a directory'],
      [notDb, 'is not a SQLite database'],
      [truncated, 'is truncated (8192 bytes; its header announces'],
      [tiny, 'is truncated (16 bytes'],
      [corrupt, 'cannot be used by SQLite: database disk image is malformed (SQLITE_CORRUPT)'], // passes the checks; SQLite's own message
      [readOnly, 'the file is read-only (mode 0444)'],
      [path.join(roFolder, 'db.sqlite'), `its folder is read-only (mode 0555) (SQLite creates its -wal file`],
      [path.join(roFolder, 'new', 'db.sqlite'), `its folder '${roFolder}' is read-only (mode 0555)`],
      ['/dev/null', 'is not a regular file'],
      [':memory:', 'must be a file path'],
      ['/proc/circuitlog/db.sqlite', "cannot be created: '/proc' is on /proc, a virtual filesystem"],
      ['/proc/self/status', 'is on /proc, a virtual filesystem'],
    ];
    try {
      for (const [db, problem] of cases) {
        const ours = db.startsWith(dir); // a folder of this test: compare its files before and after
        const before = ours && fs.existsSync(path.dirname(db)) ? snapshot(path.dirname(db)) : null;
        const result = await refusal({ CIRCUITLOG_DB: db });
        expect(result.code).toBe(2);
        expect(result.stderr).toContain(`circuitlog: cannot start: CIRCUITLOG_DB: '${db}' ${problem}`);
        if (before) expect(snapshot(path.dirname(db))).toEqual(before);
      }
    } finally {
      fs.chmodSync(roFolder, 0o755);
    }
  });
});

describe('start-up with a database path the operating system refuses', () => {
  it('exits 2 with one line naming the path and the reason, no stack trace (ENOTDIR, ENAMETOOLONG, read-only folder, a folder)', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'plain-file');
    fs.writeFileSync(file, 'not a folder');
    const roFolder = path.join(dir, 'ro');
    fs.mkdirSync(roFolder, 0o555);
    const longName = path.join(dir, `${'n'.repeat(300)}.db`);
    const longPath = path.join(dir, `${'deep/'.repeat(900)}db.sqlite`);
    const cases: [string, string][] = [
      [path.join(file, 'db.sqlite'), `cannot be created: '${file}' is not a folder`],
      [path.join(file, 'sub', 'db.sqlite'), `cannot be created: '${file}' is not a folder`],
      [longName, 'is too long (ENAMETOOLONG: at most 255 bytes a name and 4095 the whole path)'],
      [longPath, 'is too long (ENAMETOOLONG'],
      [path.join(roFolder, 'db.sqlite'), `its folder '${roFolder}' is read-only (mode 0555)`],
      [dir, 'is a directory, not a database file'],
    ];
    try {
      for (const [db, problem] of cases) {
        const result = await refusal({ CIRCUITLOG_DB: db });
        expect(result.code).toBe(2);
        expect(result.stderr).toContain(`circuitlog: cannot start: CIRCUITLOG_DB: '${db}' ${problem}`);
        expect(result.stderr.split('\n').filter(Boolean)).toHaveLength(1); // one line, no stack trace
      }
      expect(fs.readdirSync(dir).sort()).toEqual(['plain-file', 'ro']); // nothing created
    } finally {
      fs.chmodSync(roFolder, 0o755);
    }
  });
});

describe('start-up with a bad config file or token', () => {
  it('refuses each with a message naming the key or variable, exit 2', async () => {
    const dir = tempDir();
    const write = (name: string, text: string) => {
      fs.writeFileSync(path.join(dir, name), text);
      return path.join(dir, name);
    };
    const cases: [Record<string, string>, string][] = [
      [{ CIRCUITLOG_CONFIG: write('empty.yaml', '') }, `CIRCUITLOG_CONFIG ${dir}/empty.yaml: the file is empty`],
      [
        {
          CIRCUITLOG_CONFIG: write(
            'dc.yaml',
            'local_dc: dc9\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "http://127.0.0.1:1" }]\n',
          ),
        },
        "local_dc: 'dc9' matches no node of upstream 'users'",
      ],
      [
        {
          CIRCUITLOG_CONFIG: write(
            'url.yaml',
            'local_dc: dc1\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "http://127.0.0.1:99999" }]\n',
          ),
        },
        'upstreams.users.nodes[0].url: must be an http:// or https:// URL',
      ],
      [{ CIRCUITLOG_TOKEN: 'token-0123456789abcdef ' }, 'CIRCUITLOG_TOKEN: must not begin or end with whitespace'],
      [{ CIRCUITLOG_WORKERS: 'lots' }, "CIRCUITLOG_WORKERS: must be an integer from 1 to 256 or 'auto'"],
    ];
    for (const [env, message] of cases) {
      const result = await refusal({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), ...env });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(message);
      expect(result.stderr).not.toMatch(/::/);
    }
  });
});

describe('start-up log', () => {
  it('says in one line what the service runs with, never the token', async () => {
    const dir = tempDir();
    const config = path.join(dir, 'c.yaml');
    fs.writeFileSync(
      config,
      'local_dc: dc1\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "http://127.0.0.1:9" }]\n    health_check: { enabled: false }\n',
    );
    const token = 'token-0123456789abcdef';
    const db = path.join(dir, 'db.sqlite');
    const server = await startServer({
      CIRCUITLOG_DB: db,
      CIRCUITLOG_CONFIG: config,
      CIRCUITLOG_TOKEN: token,
      CIRCUITLOG_SYNCHRONOUS: 'full',
    });
    running.push(server);
    expect(server.logs.filter((l) => l.event === 'starting')).toEqual([
      expect.objectContaining({
        config_file: config,
        upstreams: ['users'],
        token: 'on',
        workers: 1,
        synchronous: 'FULL',
        db,
      }),
    ]);
    expect(JSON.stringify(server.logs)).not.toContain(token);
  });
});

describe('start-up log on IPv6 loopback (HOST=::1)', () => {
  for (const workers of ['1', '2']) {
    it(`gives a URL with the address in brackets, http://[::1]:<port>, that answers (${workers} worker(s))`, async () => {
      const server = await startServer(
        { CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite'), HOST: '::1', CIRCUITLOG_WORKERS: workers },
        { detached: true },
      );
      try {
        const line = server.logs.find((l) => l.event === 'listening')!;
        expect(line.msg).toMatch(
          new RegExp(`^circuitlog listening on http://\\[::1\\]:${server.port}( with 2 workers)?$`),
        );
        const url = /http:\/\/\S+/.exec(String(line.msg))![0];
        expect(new URL(url).hostname).toBe('[::1]');
        expect((await fetch(`${url}/health`)).status).toBe(200);
      } finally {
        await server.killGroup();
      }
    });
  }
});
