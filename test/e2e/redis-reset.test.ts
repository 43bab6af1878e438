import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { openStream, type SseStream } from '../observe/sse-client.js';
import { cursorAfter, eventually, request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const run = promisify(execFile);
const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
const streams: SseStream[] = [];
afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

/** Two hosts on one fresh redis-server, with `pay` declared in the config file (failure_threshold 3). */
async function twoHosts(): Promise<{ redis: RedisServer; a: ServerProcess; b: ServerProcess }> {
  const redis = await startRedis();
  redises.push(redis);
  const config = path.join(tempDir(), 'c.yaml');
  fs.writeFileSync(config, 'circuits:\n  pay:\n    failure_threshold: 3\n    timeout_seconds: 600\n');
  const env = { CIRCUITLOG_STORE: redis.url(), CIRCUITLOG_CONFIG: config };
  const [a, b] = await Promise.all([startServer(env, { detached: true }), startServer(env, { detached: true })]);
  running.push(a, b);
  return { redis, a, b };
}

const allowed = async (host: ServerProcess, name: string) =>
  (await request(`${host.url}/circuits/${name}/allowed`, 'GET', 5_000)).status === 200;

async function trip(host: ServerProcess, name: string, failures: number): Promise<void> {
  for (let i = 0; i < failures; i++)
    expect((await request(`${host.url}/circuits/${name}/failure`, 'POST')).status).toBe(200);
}

async function empty(redis: RedisServer, how: 'FLUSHALL' | 'restart'): Promise<RedisServer> {
  if (how === 'FLUSHALL') {
    await run('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), 'FLUSHALL']);
    return redis;
  }
  await redis.stop('SIGKILL'); // no persistence: it comes back empty
  const again = await startRedis({ port: redis.port, dir: redis.dir });
  redises.push(again);
  return again;
}

describe.each(['FLUSHALL', 'restart'] as const)('a Redis emptied under running hosts (%s)', (how) => {
  it('is noticed by every host: caches rebuilt, declared circuits declared again, a new trip refused everywhere', async () => {
    const { redis, a, b } = await twoHosts();
    await trip(a, 'pay', 3);
    await trip(a, 'other', 1);
    expect(await allowed(a, 'pay')).toBe(false);
    expect(await eventually(async () => !(await allowed(b, 'pay')), 1_000)).toBe(true);

    await empty(redis, how);
    // The truth is gone: every host agrees on the empty store (a fresh, closed circuit) within 2 s...
    for (const host of [a, b]) {
      const fresh = async () =>
        (await request(`${host.url}/circuits/pay`)).json?.failure_count === 0 &&
        (await request(`${host.url}/circuits/other`)).status === 404;
      expect(await eventually(fresh, 2_000), `${host.url} still holds the old circuits`).toBe(true);
      const pay = (await request(`${host.url}/circuits/pay`)).json;
      expect(pay).toMatchObject({ state: 'closed', failure_count: 0, failure_threshold: 3 }); // ...declared again from the config file
      expect((await request(`${host.url}/circuits/other`)).status).toBe(404);
    }
    // ...and new writes count from there, the writer's own cache included.
    await trip(a, 'pay', 2);
    expect((await request(`${b.url}/circuits/pay`)).json.failure_count).toBe(2);
    await trip(b, 'pay', 1);
    expect(await allowed(b, 'pay')).toBe(false);
    expect(await eventually(async () => !(await allowed(a, 'pay')), 1_000), 'the trip on B is not refused on A').toBe(
      true,
    );
    expect((await request(`${b.url}/circuits/pay/reset`, 'POST')).status).toBe(200);
    expect(await eventually(() => allowed(a, 'pay'), 1_000), 'the reset on B is not seen on A').toBe(true);
    // The log line comes through the child's stdout pipe: waited for, not read at once.
    for (const host of [a, b])
      expect(
        await eventually(async () => host.logs.some((l) => l.event === 'redis_store_reset'), 5_000),
        `${host.url} logged no reset`,
      ).toBe(true);
  });

  it('keeps /events/stream going: a stream opened before, and one resumed with Last-Event-ID, get the transitions made after', async () => {
    const { redis, a, b } = await twoHosts();
    const live = await openStream(`${b.url}/events/stream`);
    streams.push(live);
    await trip(a, 'pay', 3);
    const before = await live.next(2_000);
    expect(before.data).toMatchObject({ circuit: 'pay', to: 'open' });

    await empty(redis, how);
    await eventually(async () => (await request(`${a.url}/circuits/pay`)).json?.failure_count === 0, 2_000);
    await trip(a, 'pay', 3);
    const after = await live.next(3_000);
    expect(after.data).toMatchObject({ circuit: 'pay', to: 'open' });
    expect(cursorAfter(after.rawId, before.rawId)).toBe(true); // ids keep increasing across the reset (cursors over the shards)

    const resumed = await openStream(`${a.url}/events/stream`, { 'last-event-id': before.rawId });
    streams.push(resumed);
    expect((await resumed.next(2_000)).rawId).toBe(after.rawId);
  });
});
