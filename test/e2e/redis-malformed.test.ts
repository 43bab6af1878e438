import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { RedisKeys } from '../../src/store/redis/redis-keys.js';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually, request } from '../redis/http.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, type ServerProcess } from '../server-process.js';

const keys = new RedisKeys('circuitlog:');

const exec = promisify(execFile);
const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
});

async function setup(): Promise<{
  redis: RedisServer;
  host: () => Promise<ServerProcess>;
  cli: (...args: string[]) => Promise<string>;
}> {
  const redis = await startRedis();
  redises.push(redis);
  const host = async () => {
    const server = await startServer({ CIRCUITLOG_STORE: redis.url() }, { detached: true }); // metrics on: the mirror loads every circuit at start
    running.push(server);
    return server;
  };
  const cli = async (...args: string[]) =>
    (await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(redis.port), ...args])).stdout.trim();
  return { redis, host, cli };
}

const warnings = (s: ServerProcess, key: string) =>
  s.logs.filter((l) => l.event === 'redis_malformed' && l.key === key);

describe('malformed data in Redis is skipped and logged once, and the service keeps serving', () => {
  it('a corrupt c:{name} (not JSON, a bad field, a key of another type): the list skips it, a new host starts, a write replaces it', async () => {
    const { host, cli } = await setup();
    const a = await host();
    for (const name of ['good', 'notjson', 'badfield', 'string'])
      expect((await request(`${a.url}/circuits/${name}/failure`, 'POST')).status).toBe(200);
    await cli('HSET', keys.circuit('notjson'), 'c', '{not json');
    const stored = JSON.parse(await cli('HGET', keys.circuit('badfield'), 'c'));
    await cli('HSET', keys.circuit('badfield'), 'c', JSON.stringify({ ...stored, failureCount: 'many' }));
    await cli('DEL', keys.circuit('string'));
    await cli('SET', keys.circuit('string'), 'garbage');

    for (let i = 0; i < 2; i++) {
      const list = await request(`${a.url}/circuits`);
      expect(list.status).toBe(200);
      expect(list.json.circuits.map((c: { name: string }) => c.name)).toEqual(['good']);
    }
    await eventually(async () => warnings(a, keys.circuit('string')).length > 0, 2_000); // log lines arrive after the answer
    for (const key of [keys.circuit('notjson'), keys.circuit('badfield'), keys.circuit('string')])
      expect(warnings(a, key), key).toHaveLength(1);
    expect(warnings(a, keys.circuit('badfield'))[0]!.problem).toMatch(/failureCount/);

    const b = await host(); // loads every circuit for the state gauges at start
    expect((await request(`${b.url}/metrics`)).status).toBe(200);
    expect((await request(`${b.url}/circuits/notjson`)).status).toBe(404); // unusable: read as absent
    const written = await request(`${b.url}/circuits/notjson/failure`, 'POST');
    expect(written.status).toBe(200);
    expect(written.json).toMatchObject({ name: 'notjson', failure_count: 1 });
    expect((await request(`${a.url}/circuits`)).json.circuits.map((c: { name: string }) => c.name)).toEqual([
      'good',
      'notjson',
    ]);
  });

  it('a stream entry with at=not-a-number: /dashboard/api/state answers on a running and on a new host', async () => {
    const { host, cli } = await setup();
    const a = await host();
    expect((await request(`${a.url}/circuits/x/failure`, 'POST')).status).toBe(200);
    const seq = await cli('INCR', keys.of('x').seq);
    await cli(
      'XADD',
      keys.of('x').transitions,
      `${seq}-0`,
      'circuit',
      'x',
      'from',
      'closed',
      'to',
      'open',
      'reason',
      'manual',
      'at',
      'not-a-number',
    );
    expect(
      await eventually(async () => a.logs.some((l) => l.event === 'redis_malformed' && l.entry === `${seq}-0`), 3_000),
    ).toBe(true);
    expect((await request(`${a.url}/dashboard/api/state`)).status).toBe(200);
    const b = await host();
    expect((await request(`${b.url}/dashboard/api/state`)).status).toBe(200);
    expect(await eventually(async () => b.logs.some((l) => l.event === 'redis_malformed'), 2_000)).toBe(true);
    expect(b.logs.filter((l) => l.event === 'redis_malformed')).toHaveLength(1);
  });

  it('a corrupt entry of e:{name}: GET /circuits/{name}/events answers the others', async () => {
    const { host, cli } = await setup();
    const a = await host();
    for (let i = 0; i < 5; i++) await request(`${a.url}/circuits/y/failure`, 'POST'); // opens it: one transition
    await cli('LPUSH', keys.events('y'), 'garbage');
    const events = await request(`${a.url}/circuits/y/events`);
    expect(events.status).toBe(200);
    expect(events.json.events).toHaveLength(1);
    expect(await eventually(async () => warnings(a, keys.events('y')).length === 1, 2_000)).toBe(true);
  });

  it('a garbage PUBLISH on the changes channel leaves the cache on: reads of a held circuit still answer while Redis is frozen', async () => {
    const { redis, host, cli } = await setup();
    const a = await host();
    expect((await request(`${a.url}/circuits/held/failure`, 'POST')).status).toBe(200);
    expect((await request(`${a.url}/circuits/held/allowed`)).status).toBe(200);
    for (const garbage of ['garbage', '7\n1\nheld\n{not json', '\n\n\n'])
      expect(await cli('PUBLISH', 'circuitlog:changes:0', garbage)).toBe('1');
    await new Promise((r) => setTimeout(r, 200));
    expect(a.logs.filter((l) => l.event === 'redis_malformed' && l.key === 'circuitlog:changes:0')).toHaveLength(1);
    // Writes go on...
    await cli('PUBLISH', 'circuitlog:changes:0', 'also garbage');
    expect((await request(`${a.url}/circuits/held/failure`, 'POST')).json.failure_count).toBe(2);
    // ...and the cache still answers: with Redis frozen, a held circuit is read from memory.
    redis.child.kill('SIGSTOP');
    try {
      const read = await request(`${a.url}/circuits/held/allowed`, 'GET', 3_000);
      expect(read.status).toBe(200);
      expect(read.json.circuit.failure_count).toBe(2);
    } finally {
      redis.child.kill('SIGCONT');
    }
  });
});
