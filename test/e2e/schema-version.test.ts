import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { REDIS_SCHEMA_VERSION } from '../../src/store/redis/schema-key.js';
import { request } from '../redis/http.js';
import { until } from '../redis/until.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { refusedStart } from '../refused-start.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const exec = promisify(execFile);
const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

/** The highest migration this build has: its SQLite schema version. */
const SUPPORTED = Math.max(...readMigrations(defaultMigrationsDir()).map((m) => m.version));
const tooNew = (found: number, supported: number) =>
  `circuitlog: cannot start: database schema version ${found} is newer than this build supports (${supported}): upgrade circuitlog or restore a backup\n`;

/** A database migrated by this build, then by a newer one (one migration more). */
function newerDatabase(file: string): void {
  const db = openDatabase(file);
  migrate(db, readMigrations(defaultMigrationsDir()));
  db.exec('CREATE TABLE future (id INTEGER PRIMARY KEY)');
  db.prepare("INSERT INTO schema_migrations VALUES (?, ?, '2027-01-01T00:00:00.000Z')").run(
    SUPPORTED + 1,
    `${SUPPORTED + 1}_future.sql`,
  );
  db.close(); // checkpoints the WAL into the file
}

const sha = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

describe('a database migrated by a newer build', () => {
  it.each([1, 2])(
    'SQLite: exits 2 with the one line naming both versions and writes nothing (%i worker(s))',
    async (workers) => {
      const dir = tempDir();
      const file = path.join(dir, 'db.sqlite');
      newerDatabase(file);
      const before = { hash: sha(file), files: fs.readdirSync(dir) };
      const { code, stderr } = await refusedStart({ CIRCUITLOG_DB: file, CIRCUITLOG_WORKERS: String(workers) });
      expect(code).toBe(2);
      expect(stderr).toBe(tooNew(SUPPORTED + 1, SUPPORTED));
      expect({ hash: sha(file), files: fs.readdirSync(dir) }).toEqual(before);
    },
  );

  it('Redis: a schema key above this build exits 2 with the same line, and the key is left as it was', async () => {
    const redis = await startRedis();
    redises.push(redis);
    const cli = async (...args: string[]) =>
      (await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), ...args])).stdout.trim();
    await cli('SET', 'circuitlog:schema', String(REDIS_SCHEMA_VERSION + 1));
    const { code, stderr } = await refusedStart({ CIRCUITLOG_STORE: redis.url() });
    expect(code).toBe(2);
    expect(stderr).toBe(tooNew(REDIS_SCHEMA_VERSION + 1, REDIS_SCHEMA_VERSION));
    expect(await cli('GET', 'circuitlog:schema')).toBe(String(REDIS_SCHEMA_VERSION + 1));
    expect(await cli('KEYS', '*')).toBe('circuitlog:schema'); // nothing else written
  });

  it('Redis: a schema key that holds no number stops the start naming the key', async () => {
    const redis = await startRedis();
    redises.push(redis);
    await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), 'SET', 'circuitlog:schema', 'banana']);
    const { code, stderr } = await refusedStart({ CIRCUITLOG_STORE: redis.url() });
    expect(code).toBe(2);
    expect(stderr).toContain("the key 'circuitlog:schema' holds 'banana', not a schema version");
    expect(stderr.split('\n').filter(Boolean)).toHaveLength(1);
  });
});

describe('GET /health and /health/ready report the schema version', () => {
  it('SQLite: the highest migration applied', async () => {
    const dir = tempDir();
    const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite') }, { detached: true });
    running.push(server);
    expect((await request(`${server.url}/health`)).json).toEqual({
      status: 'ok',
      schema_version: SUPPORTED,
    });
    expect((await request(`${server.url}/health/ready`)).json).toEqual({
      status: 'ready',
      schema_version: SUPPORTED,
    });
  });

  it('Redis: the schema key, written at the first start', async () => {
    const redis = await startRedis();
    redises.push(redis);
    const server = await startServer({ CIRCUITLOG_STORE: redis.url() }, { detached: true });
    running.push(server);
    expect((await request(`${server.url}/health`)).json).toEqual({
      status: 'ok',
      schema_version: REDIS_SCHEMA_VERSION,
    });
    expect((await request(`${server.url}/health/ready`)).json).toEqual({
      status: 'ready',
      schema_version: REDIS_SCHEMA_VERSION,
    });
    const { stdout } = await exec('redis-cli', [
      '-h',
      '127.0.0.1',
      '-p',
      String(redis.port),
      'GET',
      'circuitlog:schema',
    ]);
    expect(stdout.trim()).toBe(String(REDIS_SCHEMA_VERSION));
  });

  it('Redis: a store emptied under a running host (FLUSHALL) gets its schema key again', async () => {
    const redis = await startRedis();
    redises.push(redis);
    const server = await startServer({ CIRCUITLOG_STORE: redis.url() }, { detached: true });
    running.push(server);
    const cli = async (...args: string[]) =>
      (await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), ...args])).stdout.trim();
    await cli('FLUSHALL');
    await until(
      async () => (await cli('GET', 'circuitlog:schema')) === String(REDIS_SCHEMA_VERSION),
      'the schema key again',
    );
    await until(async () => server.logs.some((l) => l.event === 'redis_store_reset'), 'the reset in the log');
  });
});
