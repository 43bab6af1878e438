import http from 'node:http';
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { refusedPort } from '../refused-port.js';
import { refusedStart } from '../refused-start.js';
import fs from 'node:fs';
import path from 'node:path';
import { proxyYaml, startNodes, type FakeNode } from '../proxy/fake-node.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const running: ServerProcess[] = [];
const redises: RedisServer[] = [];
const blackholes: net.Server[] = [];
const nodes: FakeNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(redises.splice(0).map((r) => r.stop('SIGKILL')));
  for (const b of blackholes.splice(0)) b.close();
});

async function redisServer(options: Parameters<typeof startRedis>[0] = {}): Promise<RedisServer> {
  const server = await startRedis(options);
  redises.push(server);
  return server;
}

async function host(env: Record<string, string>): Promise<ServerProcess> {
  const server = await startServer(env, { detached: true });
  running.push(server);
  return server;
}

/** A request that fails the test if it gets no answer within `limitMs` (a hang, not a slow answer). */
function request(
  url: string,
  method = 'GET',
  limitMs = 10_000,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; json: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method,
        agent: false,
        timeout: limitMs,
        headers: method === 'POST' ? { 'content-type': 'application/json' } : {},
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, json: text ? JSON.parse(text) : null }),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${limitMs} ms: ${method} ${url}`)));
    req.on('error', reject);
    req.end(method === 'POST' ? '{}' : undefined);
  });
}

const refusal = refusedStart;

describe('CIRCUITLOG_STORE at start', () => {
  it.each([
    ['redis://', /CIRCUITLOG_STORE: 'redis:\/\/' has no host/],
    ['memcached://127.0.0.1:11211', /CIRCUITLOG_STORE: .* unknown scheme/],
    ['redis://127.0.0.1:6379/abc', /CIRCUITLOG_STORE: .* must be a database number/],
    ['sqlite:', /CIRCUITLOG_STORE: 'sqlite:' needs a file path/],
    ['redis://user:secret@/0', /CIRCUITLOG_STORE: 'redis:\/\/user:\*\*\*@\/0' is not a URL/],
  ])('refuses %s with exit code 2 naming the variable', async (store, message) => {
    const { code, stderr } = await refusal({ CIRCUITLOG_STORE: store });
    expect(code).toBe(2);
    expect(stderr).toMatch(message);
    expect(stderr).not.toContain('secret');
  });

  it('stops within 10 s with exit code 2 when nothing listens at the Redis address', async () => {
    const port = await refusedPort();
    const { code, stderr } = await refusal({ CIRCUITLOG_STORE: `redis://127.0.0.1:${port}` });
    expect(code).toBe(2);
    expect(stderr).toMatch(/CIRCUITLOG_STORE: cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+/);
  });

  it('stops within 10 s with exit code 2 when the Redis address accepts connections but never answers', async () => {
    const blackhole = net.createServer(() => {}); // holds every connection open, says nothing
    blackholes.push(blackhole);
    await new Promise<void>((r) => blackhole.listen(0, '127.0.0.1', r));
    const { port } = blackhole.address() as net.AddressInfo;
    const { code, stderr } = await refusal({ CIRCUITLOG_STORE: `redis://127.0.0.1:${port}` });
    expect(code).toBe(2);
    expect(stderr).toMatch(/CIRCUITLOG_STORE: cannot reach Redis/);
  });

  it('wins over CIRCUITLOG_DB', async () => {
    const dir = tempDir();
    const redis = await redisServer();
    const server = await host({ CIRCUITLOG_DB: `${dir}/ignored.db`, CIRCUITLOG_STORE: redis.url(3) });
    expect((await request(`${server.url}/circuits/x/failure`, 'POST')).status).toBe(200);
    const listening = server.logs.find((l) => l.event === 'listening');
    expect(listening).toMatchObject({ store: `redis://127.0.0.1:${redis.port}/3` });
    const sqlite = await host({ CIRCUITLOG_DB: `${dir}/ignored.db`, CIRCUITLOG_STORE: `sqlite:${dir}/used.db` });
    expect(sqlite.logs.find((l) => l.event === 'listening')).toMatchObject({ db: `${dir}/used.db` });
    const fs = await import('node:fs');
    expect(fs.existsSync(`${dir}/ignored.db`)).toBe(false);
  });
});

describe('Redis down or frozen', () => {
  it('answers writes 503 STORAGE_UNAVAILABLE with Retry-After within the timeout and /health 503 while frozen; resumes after', async () => {
    const redis = await redisServer();
    const server = await host({ CIRCUITLOG_STORE: redis.url() });
    expect((await request(`${server.url}/circuits/x/failure`, 'POST')).status).toBe(200);
    redis.child.kill('SIGSTOP');
    const write = await request(`${server.url}/circuits/x/failure`, 'POST', 2_500); // the default timeout is 1 s
    expect(write.status).toBe(503);
    expect(write.json).toMatchObject({ code: 'STORAGE_UNAVAILABLE', type: '/problems/storage-unavailable' });
    expect(write.headers['retry-after']).toBe('1');
    expect((await request(`${server.url}/health`, 'GET', 5_000)).status).toBe(503);
    redis.child.kill('SIGCONT');
    const after = await request(`${server.url}/circuits/x/failure`, 'POST');
    expect(after.status).toBe(200);
    // The write answered 503 was still queued in the frozen Redis and ran when it woke up.
    expect(after.json.failure_count).toBe(3);
    expect((await request(`${server.url}/health`)).status).toBe(200);
  });

  it('answers 503 while Redis is down and resumes without a restart when it is back', async () => {
    const redis = await redisServer();
    const server = await host({ CIRCUITLOG_STORE: redis.url() });
    expect((await request(`${server.url}/circuits/y/failure`, 'POST')).status).toBe(200);
    await redis.stop('SIGKILL');
    const write = await request(`${server.url}/circuits/y/failure`, 'POST', 2_500);
    expect(write).toMatchObject({ status: 503, json: { code: 'STORAGE_UNAVAILABLE' } });
    expect((await request(`${server.url}/health`, 'GET', 5_000)).status).toBe(503);
    expect((await request(`${server.url}/circuits/y/allowed`, 'GET', 2_500)).status).toBe(503);
    redises.push(await startRedis({ port: redis.port, dir: redis.dir }));
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await request(`${server.url}/circuits/y/failure`, 'POST')).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    expect(status).toBe(200);
    expect((await request(`${server.url}/health`)).status).toBe(200);
  });
});

describe('the proxy on a storage outage', () => {
  async function proxyHost(choice?: string) {
    const started = await startNodes('dc1-a', 'dc2-a');
    nodes.push(...Object.values(started));
    const redis = await redisServer();
    const config = path.join(tempDir(), 'c.yaml');
    fs.writeFileSync(config, proxyYaml(started, 'health_check: { enabled: false }'));
    const env: Record<string, string> = { CIRCUITLOG_STORE: redis.url(), CIRCUITLOG_CONFIG: config };
    if (choice) env.CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE = choice;
    const server = await host(env);
    expect((await request(`${server.url}/proxy/users/x`)).status).toBe(200);
    await redis.stop('SIGKILL');
    return { server, local: started['dc1-a']! };
  }

  it('fails open to the local DC by default', async () => {
    const { server, local } = await proxyHost();
    const before = local.hits;
    const res = await request(`${server.url}/proxy/users/x`, 'GET', 5_000);
    expect(res.status).toBe(200);
    expect(res.headers['x-node']).toBe('dc1-a');
    expect(local.hits).toBe(before + 1);
  });

  it('refuses with 503 STORAGE_UNAVAILABLE when configured to', async () => {
    const { server, local } = await proxyHost('refuse');
    const before = local.hits;
    const res = await request(`${server.url}/proxy/users/x`, 'GET', 5_000);
    expect(res).toMatchObject({ status: 503, json: { code: 'STORAGE_UNAVAILABLE' } });
    expect(local.hits).toBe(before);
  });
});

describe('durability with appendonly yes, appendfsync everysec (the recommended default)', () => {
  it('keeps every acknowledged outcome through a kill -9 of circuitlog under load and a kill -9 and restart of redis-server', async () => {
    let redis = await redisServer({ appendfsync: 'everysec' });
    const server = await host({ CIRCUITLOG_STORE: redis.url() });
    let acknowledged = 0;
    let sent = 0;
    const load = Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 5_000; i++) {
        sent++;
        const ok = await request(`${server.url}/circuits/durable/failure`, 'POST', 5_000).then(
          (r) => r.status === 200,
          () => null,
        );
        if (ok === null) return; // the process is gone
        if (ok) acknowledged++;
      }
    });
    for (let i = 0; i < 2_000 && acknowledged < 300; i++) await new Promise((r) => setTimeout(r, 5));
    expect(acknowledged).toBeGreaterThanOrEqual(300);
    await server.killGroup();
    await Promise.all(load);
    await redis.stop('SIGKILL');
    redis = await startRedis({ port: redis.port, dir: redis.dir, appendfsync: 'everysec' });
    redises.push(redis);
    const again = await host({ CIRCUITLOG_STORE: redis.url() });
    const circuit = (await request(`${again.url}/circuits/durable`)).json;
    expect(circuit.failure_count).toBeGreaterThanOrEqual(acknowledged);
    expect(circuit.failure_count).toBeLessThanOrEqual(sent);
  });
});
