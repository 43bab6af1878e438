import { afterEach, describe, expect, it } from 'vitest';
import { request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

describe('503 storage-unavailable says what a caller can know', () => {
  it('a read says nothing was read or changed; a write that got no answer says it may or may not have been applied', async () => {
    const redis = await startRedis();
    redises.push(redis);
    const server = await startServer({ CIRCUITLOG_STORE: redis.url() }, { detached: true });
    running.push(server);
    expect((await request(`${server.url}/circuits/x/failure`, 'POST')).status).toBe(200);

    await redis.stop('SIGKILL');
    for (const path of ['/circuits', '/circuits?state=open', '/circuits/never-seen', '/circuits/x/events']) {
      const read = await request(`${server.url}${path}`, 'GET', 5_000);
      expect(read.status, path).toBe(503);
      expect(read.json, path).toMatchObject({
        code: 'STORAGE_UNAVAILABLE',
        detail: 'The shared store (Redis) is unavailable; nothing was read or changed. Try again.',
      });
      expect(read.headers['retry-after']).toBe('1');
    }
    redises.push(await startRedis({ port: redis.port, dir: redis.dir }));
    let back = 0;
    for (let i = 0; i < 100 && back !== 200; i++) {
      back = (await request(`${server.url}/circuits/x/failure`, 'POST')).status; // the host holds x again
      if (back !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(back).toBe(200);
    // A write with no answer from a frozen Redis may still be applied when it wakes up.
    redises.at(-1)!.child.kill('SIGSTOP');
    const write = await request(`${server.url}/circuits/x/failure`, 'POST', 5_000);
    redises.at(-1)!.child.kill('SIGCONT');
    expect(write.status).toBe(503);
    expect(write.json.detail).toBe(
      'The shared store (Redis) is unavailable; the change may or may not have been applied.',
    );
  });
});
