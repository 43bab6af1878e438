import { afterEach, describe, expect, it } from 'vitest';
import { eventually, request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, takeCrashes, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

const alive = (s: ServerProcess) => s.child.exitCode === null && s.child.signalCode === null;

describe('Redis restarting under load', () => {
  it('keeps the process alive through 12 kill -9 and restarts of redis-server (some flapping), metrics on, and serves again after each', async () => {
    let redis = await startRedis({ appendfsync: 'everysec' });
    redises.push(redis);
    const server = await startServer({ CIRCUITLOG_STORE: redis.url() }, { detached: true });
    running.push(server);
    // 3,000 circuits: the state-gauge mirror reloads them in 6 pages after every resubscription,
    // a window in which the next restart makes its reads fail.
    for (let b = 0; b < 3; b++) {
      const outcomes = Array.from({ length: 1_000 }, (_, i) => ({ circuit: `c${b * 1_000 + i}`, success: true }));
      expect((await request(`${server.url}/outcomes`, 'POST', 10_000, { outcomes })).status).toBe(200);
    }

    // Bounded load: 4 loops of writes, lists and scrapes, at most 4,000 requests in all.
    let stop = false;
    let sent = 0;
    const answered = new Map<number, number>();
    const paths = ['/circuits/c7/failure', '/circuits', '/metrics', '/circuits/c3/allowed'];
    const load = paths.map(async (path) => {
      while (!stop && sent < 4_000) {
        sent++;
        const status = await request(`${server.url}${path}`, path.endsWith('failure') ? 'POST' : 'GET', 5_000).then(
          (r) => r.status,
          () => 0, // refused or reset: counted, and the process is checked below
        );
        answered.set(status, (answered.get(status) ?? 0) + 1);
      }
    });
    try {
      for (let round = 0; round < 8; round++) {
        // Down for 0.1 to 1.5 s, then up; in odd rounds it flaps: killed again shortly after it is back.
        for (const upMs of round % 2 === 1 ? [20 + 40 * round, 0] : [0]) {
          await redis.stop('SIGKILL');
          await new Promise((r) => setTimeout(r, 100 + 200 * round));
          redis = await startRedis({ port: redis.port, dir: redis.dir, appendfsync: 'everysec' });
          redises.push(redis);
          await new Promise((r) => setTimeout(r, upMs));
        }
        const serves = await eventually(async () => {
          const [write, list, metrics] = await Promise.all([
            request(`${server.url}/circuits/c1/failure`, 'POST', 5_000),
            request(`${server.url}/circuits`, 'GET', 5_000),
            request(`${server.url}/metrics`, 'GET', 5_000),
          ]);
          return write.status === 200 && list.status === 200 && metrics.status === 200;
        }, 15_000);
        expect(alive(server), `round ${round}: the server died; stderr: ${server.stderr().slice(-2_000)}`).toBe(true);
        expect(serves, `round ${round}: the server does not serve again`).toBe(true);
      }
    } finally {
      stop = true;
      await Promise.all(load);
    }
    expect(alive(server)).toBe(true);
    expect(takeCrashes()).toEqual([]);
    expect(answered.get(500) ?? 0).toBe(0);
    expect(answered.get(200) ?? 0).toBeGreaterThan(0);
    const list = await request(`${server.url}/circuits?limit=100`);
    expect(list.json.circuits.length).toBe(100);
  }, 180_000);
});
