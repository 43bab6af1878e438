import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { requestJson } from '../fresh-request.js';

// CIRCUITLOG_WORKERS=2 on CIRCUITLOG_STORE=redis://: each worker is a Redis client of its own.
let redis: RedisServer;
let db = 0;
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

const pids = (server: ServerProcess, event: string) =>
  new Set(server.logs.filter((l) => l.event === event).map((l) => l.pid as number));

/** Poll (bounded) until `check` holds; what is asserted afterwards is the value, not the time. */
async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Two workers on a fresh Redis database; `debug` logs refusals with the worker's pid. */
async function twoWorkers(yaml: string): Promise<ServerProcess> {
  db++;
  const file = path.join(tempDir(), 'c.yaml');
  fs.writeFileSync(file, yaml);
  const env = {
    CIRCUITLOG_STORE: redis.url(db),
    CIRCUITLOG_WORKERS: '2',
    CIRCUITLOG_CONFIG: file,
    CIRCUITLOG_LOG_LEVEL: 'debug',
  };
  const server = await startServer(env, { detached: true });
  running.push(server);
  await until(() => pids(server, 'worker_listening').size === 2, 'both workers to listen');
  return server;
}

const request = (url: string, method = 'GET', body?: unknown) => requestJson(url, method, body);

const many = (n: number, send: (i: number) => Promise<{ status: number; json: any }>) =>
  Promise.all(Array.from({ length: n }, (_, i) => send(i)));

describe('two workers on one Redis', () => {
  it('count concurrent failures through both workers exactly, with one transition at the threshold; /health ok', async () => {
    const server = await twoWorkers('circuit_defaults:\n  failure_threshold: 300\n');
    expect((await many(4, () => request(`${server.url}/health`))).map((r) => [r.status, r.json.status])).toEqual(
      Array(4).fill([200, 'ok']),
    );
    const answers = await many(600, (i) =>
      i % 2
        ? request(`${server.url}/circuits/pay/outcomes`, 'POST', { success: false })
        : request(`${server.url}/circuits/pay/failure`, 'POST', {}),
    );
    expect(answers.filter((r) => r.status !== 200)).toEqual([]);
    // Every answer's count is distinct: no two failures were counted as one.
    expect(new Set(answers.map((r) => r.json.failure_count)).size).toBe(600);
    for (let i = 0; i < 4; i++)
      expect((await request(`${server.url}/circuits/pay`)).json).toMatchObject({ state: 'open', failure_count: 600 });
    expect((await request(`${server.url}/circuits/pay/events`)).json.events).toEqual([
      expect.objectContaining({ from: 'closed', to: 'open', reason: 'failure_threshold_reached' }),
    ]);
    await until(() => server.logs.some((l) => l.event === 'transition'), 'the transition log line');
    expect(server.logs.filter((l) => l.event === 'transition')).toHaveLength(1);
  });

  it('refuse /allowed on every request through both workers within 1 s of a trip', async () => {
    const server = await twoWorkers('circuit_defaults:\n  failure_threshold: 1\n');
    // Both workers hold the closed circuit in their caches (fresh connections alternate workers).
    expect((await many(10, () => request(`${server.url}/circuits/gw/allowed`))).map((r) => r.status)).toEqual(
      Array(10).fill(200),
    );
    expect((await request(`${server.url}/circuits/gw/failure`, 'POST', {})).json.state).toBe('open');
    const round = async () =>
      (await many(10, () => request(`${server.url}/circuits/gw/allowed`))).every((r) => r.status === 503);
    await until(round, 'a whole round of /allowed to be refused', 1_000);
    for (let i = 0; i < 5; i++) expect(await round()).toBe(true);
    // Both workers refused (refusals are logged with the worker's pid).
    await until(() => pids(server, 'request_failed').size === 2, 'refusals logged by both workers', 2_000);
    expect(pids(server, 'request_failed')).toEqual(pids(server, 'worker_listening'));
  });
});
