import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, hammer, type Tally } from '../hammer-client.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

// Issue 15: a connection accepted during start-up must be answered. Refused is fine (the
// port is not open yet), and so is a reset at once (see RESET_AT_ONCE_MS); a hang is not,
// and neither is a reset after waiting.
let redis: RedisServer;
let redisDb = 0;
const running: ServerProcess[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
});
afterAll(async () => {
  await redis.stop();
});

const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every request was refused or answered: no hang, no late reset, every 503 with Retry-After. */
function expectAllAnswered(tally: Tally): void {
  expect({ hung: tally.hung, errors: tally.errors, bare503: tally.bare503 }).toEqual({
    hung: 0,
    errors: [],
    bare503: 0,
  });
  expect(Object.keys(tally.statuses).filter((s) => s !== '200' && s !== '503')).toEqual([]);
}

/** A config declaring 300 circuits: each is written at start, which takes a while. */
function declaringConfig(): string {
  const file = path.join(tempDir(), 'c.yaml');
  const circuits = Array.from({ length: 300 }, (_, i) => `  dep-${i}:\n    failure_threshold: 3\n`).join('');
  fs.writeFileSync(file, `circuits:\n${circuits}`);
  return file;
}

/** Hammer a fixed port from before the server starts until a while after it listens. */
async function hammeredStart(store: Record<string, string>): Promise<Tally> {
  const env = { ...store, CIRCUITLOG_CONFIG: declaringConfig() };
  const port = await freePort();
  const client = hammer(port);
  await settle(50); // the client is already being refused
  const server = await startServer({ ...env, PORT: String(port) }, { detached: true, timeoutMs: 30_000 });
  running.push(server);
  await settle(500);
  const tally = await client.stop();
  expect(tally.refused).toBeGreaterThan(0); // it really was there before the port opened
  expect(tally.statuses[200]).toBeGreaterThan(0); // and after
  return tally;
}

describe('requests sent while the server starts', () => {
  for (const workers of ['1', '2']) {
    it(`are refused or answered, never left hanging: SQLite, ${workers} worker(s)`, async () => {
      const tally = await hammeredStart({
        CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite'),
        CIRCUITLOG_WORKERS: workers,
      });
      expectAllAnswered(tally);
    });

    it(`are refused or answered, never left hanging: Redis, ${workers} worker(s)`, async () => {
      redisDb++;
      const tally = await hammeredStart({ CIRCUITLOG_STORE: redis.url(redisDb), CIRCUITLOG_WORKERS: workers });
      expectAllAnswered(tally);
    });
  }

  it('are refused or answered by a second instance waiting on the locked SQLite file until it gives up (exit 2)', async () => {
    const db = path.join(tempDir(), 'db.sqlite');
    const first = await startServer({ CIRCUITLOG_DB: db }, { detached: true });
    running.push(first);
    const port = await freePort();
    const client = hammer(port);
    await settle(50);
    const second = spawn(process.execPath, ['dist/main.js'], {
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', CIRCUITLOG_DB: db },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    second.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => second.once('exit', resolve));
    await settle(100);
    const tally = await client.stop();
    expect(code).toBe(2);
    expect(stderr).toContain('CIRCUITLOG_DB: the database is locked by another process');
    expectAllAnswered(tally);
    expect(tally.statuses[200]).toBeUndefined(); // it never served
  });
});
