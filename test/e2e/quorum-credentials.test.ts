// Issue 30 proof, "the quorum cannot be faked", against the real server with a credentials file:
// on a quorum-3 circuit, one credential failing as 5 caller names, 100 times, never opens it for
// the others; 3 credentials failing open it at once. SQLite with 1 and 2 workers, Redis with 2.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type CredentialEntry, tokenSha256 } from '../../src/auth/credentials.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

type Setup = { store: 'sqlite' | 'redis'; workers: number };
const SETUPS: Setup[] = [
  { store: 'sqlite', workers: 1 },
  { store: 'sqlite', workers: 2 },
  { store: 'redis', workers: 2 },
];
const IDS = ['mallory', 'a', 'b', 'c', 'checkout'] as const;
const tokenOf = (id: string) => `${id}-token-0123456789abcdef`;
const entry = (id: string, scopes: CredentialEntry['scopes']): CredentialEntry => ({
  id,
  token_sha256: tokenSha256(tokenOf(id)),
  scopes,
});

let redis: RedisServer | undefined;
let redisDb = 0;
afterAll(async () => {
  await redis?.stop('SIGKILL');
});

async function start(setup: Setup): Promise<ServerProcess> {
  const dir = tempDir();
  let store: Record<string, string>;
  if (setup.store === 'redis') {
    redis ??= await startRedis();
    store = { CIRCUITLOG_STORE: redis.url(++redisDb) };
  } else {
    store = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite') };
  }
  const credentials = path.join(dir, 'credentials.json');
  const entries = [...IDS.map((id) => entry(id, ['report', 'read'])), entry('ops', ['configure', 'read'])];
  fs.writeFileSync(credentials, JSON.stringify({ credentials: entries }));
  const server = await startServer(
    { ...store, CIRCUITLOG_CREDENTIALS: credentials, CIRCUITLOG_WORKERS: String(setup.workers) },
    { detached: true },
  );
  const deadline = Date.now() + 10_000;
  while (
    setup.workers > 1 &&
    new Set(server.logs.filter((l) => l.event === 'worker_listening').map((l) => l.pid)).size < setup.workers
  ) {
    if (Date.now() > deadline) throw new Error('workers did not start');
    await new Promise((r) => setTimeout(r, 25));
  }
  return server;
}

/** One JSON request as `id` on a fresh connection (node:cluster spreads them over the workers). */
// biome-ignore lint/suspicious/noExplicitAny: answers are read member by member
function send(url: string, id: string, method = 'GET', body?: unknown): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { authorization: `Bearer ${tokenOf(id)}` };
    if (payload !== undefined)
      headers['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    const req = http.request(url, { method, agent: false, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text === '' ? null : JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

describe.each(SETUPS)('the quorum cannot be faked, $store with $workers worker(s)', (setup) => {
  let server: ServerProcess;
  beforeAll(async () => {
    server = await start(setup);
  });
  afterAll(async () => {
    await server?.killGroup();
  });
  const url = (name: string, tail = '') => `${server.url}/circuits/${name}${tail}`;
  const quorum3 = async (name: string) => {
    const policy = { failure_threshold: 3, timeout_seconds: 60, quorum: { min_callers: 3, window_seconds: 600 } };
    expect((await send(url(name), 'ops', 'PATCH', policy)).status).toBe(201);
  };

  it('one credential failing as 5 callers, 100 times: never opens for the others', async () => {
    await quorum3('faked');
    const states = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const answer = await send(url('faked', '/outcomes'), 'mallory', 'POST', {
        success: false,
        caller: `mallory/pod-${i % 5}`,
      });
      expect(answer.status).toBe(200);
      states.add(answer.json.state);
    }
    expect([...states]).toEqual(['closed']);
    // Another credential's callers are admitted; mallory's pods are isolated each on their own.
    expect((await send(url('faked', '/allowed?caller=checkout/pod-1'), 'checkout')).status).toBe(200);
    const circuit = (await send(url('faked'), 'checkout')).json;
    expect(circuit.state).toBe('closed');
    expect(circuit.isolated_callers.map((e: { caller: string }) => e.caller).sort()).toEqual(
      [0, 1, 2, 3, 4].map((i) => `mallory/pod-${i}`),
    );
    const events = (await send(url('faked', '/events?limit=500'), 'checkout')).json.events as { to: string }[];
    expect(events.filter((e) => e.to === 'open')).toEqual([]);
    // Reporting as a name of another credential is refused, and records nothing.
    const forged = await send(url('faked', '/outcomes'), 'mallory', 'POST', { success: false, caller: 'a/pod-1' });
    expect(forged.status).toBe(403);
    expect(forged.json.code).toBe('CALLER_NOT_PERMITTED');
  });

  it('3 credentials failing: it opens at once', async () => {
    await quorum3('real');
    const states: string[] = [];
    for (const id of ['a', 'b', 'c'])
      states.push((await send(url('real', '/outcomes'), id, 'POST', { success: false })).json.state);
    expect(states).toEqual(['closed', 'closed', 'open']);
    const refused = async () =>
      expect((await send(url('real', '/allowed?caller=checkout/pod-1'), 'checkout')).status).toBe(503);
    // On Redis the other worker is another Redis client: it learns the trip from the change feed
    // (docs/many-hosts.md: "refused on every request, by both workers, within 1 s"); on SQLite at once.
    if (setup.store === 'redis') await vi.waitFor(refused, { timeout: 5_000, interval: 20 });
    else await refused();
    const events = (await send(url('real', '/events?limit=10'), 'checkout')).json.events as Record<string, unknown>[];
    expect(events.filter((e) => e.to === 'open')).toEqual([
      expect.objectContaining({ from: 'closed', reason: 'failure_threshold_reached', callers: ['a', 'b', 'c'] }),
    ]);
  });
});
