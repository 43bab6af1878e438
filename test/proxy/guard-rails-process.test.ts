import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { proxyYaml, startNodes, type FakeNode } from './fake-node.js';

/** Every proof runs on SQLite and on Redis, with one worker and with two. */
const RUNS = [
  { store: 'sqlite', workers: 1 },
  { store: 'sqlite', workers: 2 },
  { store: 'redis', workers: 1 },
  { store: 'redis', workers: 2 },
] as const;

let redis: RedisServer | null = null;
let nextDb = 1;
let nodes: Record<string, FakeNode> = {};
const servers: ServerProcess[] = [];

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.killGroup()));
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
  nodes = {};
});

type Run = (typeof RUNS)[number];

async function launch(run: Run, extra: string, top = ''): Promise<ServerProcess> {
  const dir = tempDir();
  const configPath = path.join(dir, 'proxy.yaml');
  fs.writeFileSync(configPath, top + proxyYaml(nodes, extra));
  const store: Record<string, string> =
    run.store === 'redis' ? { CIRCUITLOG_STORE: redis!.url(nextDb++) } : { CIRCUITLOG_DB: path.join(dir, 'db.sqlite') };
  const server = await startServer(
    { CIRCUITLOG_CONFIG: configPath, CIRCUITLOG_WORKERS: String(run.workers), ...store },
    { detached: true },
  );
  servers.push(server);
  if (run.workers > 1)
    await until(
      async () =>
        new Set(server.logs.filter((l) => l.event === 'worker_listening').map((l) => l.pid)).size === run.workers,
      10_000,
    );
  return server;
}

interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** One request on a fresh connection, so that node:cluster spreads them over the workers. */
function get(url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      })
      .on('error', reject);
  });
}

async function json<T>(url: string, method = 'GET'): Promise<T> {
  const res = await fetch(url, { method });
  return (await res.json()) as T;
}

async function states(server: ServerProcess): Promise<Record<string, string>> {
  const { circuits } = await json<{ circuits: { name: string; state: string }[] }>(`${server.url}/circuits`);
  return Object.fromEntries(circuits.map((c) => [c.name, c.state]));
}

const events = async (server: ServerProcess, circuit: string) =>
  (
    await json<{ events: { from: string; to: string; reason: string }[] }>(
      `${server.url}/circuits/${encodeURIComponent(circuit)}/events?limit=500`,
    )
  ).events;

async function until(probe: () => Promise<boolean>, deadlineMs: number): Promise<void> {
  const started = Date.now();
  while (!(await probe())) {
    if (Date.now() - started > deadlineMs) throw new Error(`not within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** An open `/events/stream`: what it has received so far. */
function openStream(url: string): { readonly text: string; close(): void } {
  const state = { text: '', close: () => {} };
  const req = http.get(url, { agent: false }, (res) => {
    res.setEncoding('utf8');
    res.on('data', (c: string) => (state.text += c));
    res.on('error', () => {});
  });
  req.on('error', () => {});
  state.close = () => req.destroy();
  return state;
}

/** A node whose requests all fail with a 500 while its /health answers 200: request-outcome noise, not a dead port. */
function failRequests(node: FakeNode): void {
  node.respond = () => ({ status: 500, body: `boom from ${node.id}` });
}

describe.each(RUNS)('proxy guard rails ($store, $workers worker(s))', (run) => {
  it('ejection cap: 4 nodes, 3 failing requests, max_ejection_percent 50: at most 2 opened, every request answered', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2', 'dc1-3', 'dc1-4');
    for (const id of ['dc1-2', 'dc1-3', 'dc1-4']) failRequests(nodes[id]!);
    const server = await launch(
      run,
      // retry_budget 100%: every failed attempt may fail over (as before issue 21); 3 of 4 nodes
      // failing need more retries than the default budget (20% + 3/s) allows, and the budget is not under test here
      'failure_threshold: 2\ntimeout_seconds: 60\nretries: 1\nretry_budget: { percent: 100 }\nmax_ejection_percent: 50\nhealth_check: { enabled: false }',
    );
    const stream = openStream(`${server.url}/events/stream`);
    const statuses: number[] = [];
    let mostOut = 0;
    for (let wave = 0; wave < 12; wave++) {
      const answers = await Promise.all(Array.from({ length: 6 }, () => get(`${server.url}/proxy/users/x`)));
      statuses.push(...answers.map((a) => a.status));
      const s = await states(server);
      mostOut = Math.max(mostOut, Object.values(s).filter((state) => state !== 'closed').length);
    }
    const final = await states(server);
    const open = Object.entries(final)
      .filter(([, state]) => state === 'open')
      .map(([name]) => name);
    expect(open).toHaveLength(2); // the cap binds: two of the three failing nodes are out
    expect(mostOut).toBeLessThanOrEqual(2); // and never more, at any reading
    expect(final['users/dc1-1']).toBe('closed');
    const capped = ['users/dc1-2', 'users/dc1-3', 'users/dc1-4'].find((n) => !open.includes(n))!;
    expect(final[capped]).toBe('closed');
    const cappedEvents = (await events(server, capped)).filter((e) => e.reason === 'ejection_capped');
    expect(cappedEvents.length).toBeGreaterThanOrEqual(1);
    expect(cappedEvents[0]).toMatchObject({ from: 'closed', to: 'closed' });
    expect(statuses.every((s) => s === 200 || s === 500)).toBe(true); // never 502/503/504: the proxy kept answering
    const after = await Promise.all(Array.from({ length: 10 }, () => get(`${server.url}/proxy/users/x`)));
    expect(after.map((a) => a.status)).toEqual(Array(10).fill(200)); // the capped node fails over to the healthy one
    await until(async () => stream.text.includes('"reason":"ejection_capped"'), 3_000); // the SSE stream carries it too
    stream.close();
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(
      new RegExp(
        `circuitlog_transitions_total\\{circuit="${capped.replace('/', '\\/')}",from="closed",to="closed",reason="ejection_capped"\\} [1-9]`,
      ),
    );
  });

  it('a failing health check takes a node out past the cap', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2', 'dc1-3', 'dc1-4');
    await nodes['dc1-3']!.stop();
    await nodes['dc1-4']!.stop();
    const server = await launch(
      run,
      'failure_threshold: 2\ntimeout_seconds: 60\nmax_ejection_percent: 25\nhealth_check: { interval_ms: 100, timeout_ms: 200 }',
    );
    await until(async () => {
      const s = await states(server);
      return s['users/dc1-3'] === 'open' && s['users/dc1-4'] === 'open';
    }, 5_000);
    const s = await states(server);
    expect([s['users/dc1-1'], s['users/dc1-2']]).toEqual(['closed', 'closed']); // 2 out of 4 with a cap of 1: only health checks can do that
  });

  it('panic: a health-check path failing on every node, panic_threshold_percent 50: requests still reach the nodes and succeed', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2', 'dc2-1', 'dc2-2');
    for (const n of Object.values(nodes))
      n.respond = (req) => (req.url === '/healthz' ? { status: 404 } : null) as never;
    const server = await launch(
      run,
      'failure_threshold: 2\ntimeout_seconds: 60\npanic_threshold_percent: 50\nhealth_check: { path: /healthz, interval_ms: 100, timeout_ms: 200 }',
    );
    await until(async () => Object.values(await states(server)).every((s) => s === 'open'), 5_000);
    const answers = await Promise.all(Array.from({ length: 12 }, () => get(`${server.url}/proxy/users/x`)));
    expect(answers.map((a) => a.status)).toEqual(Array(12).fill(200));
    expect(answers.map((a) => a.headers['x-degraded'])).toEqual(Array(12).fill('panic'));
    expect(new Set(answers.map((a) => a.headers['x-node']))).toEqual(new Set(['dc1-1', 'dc1-2'])); // spread over all nodes, local DC first
    expect(Object.values(await states(server)).every((s) => s === 'open')).toBe(true); // answers to nodes against their breaker judge nothing
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain('circuitlog_proxy_panic{upstream="users"} 1');
    await until(async () => server.logs.some((l) => l.event === 'panic_entered' && l.upstream === 'users'), 2_000); // the log line reaches the pipe a little after the state

    for (const n of Object.values(nodes)) n.respond = null; // the path fixed; put the nodes back
    for (const id of Object.keys(nodes))
      await fetch(`${server.url}/circuits/${encodeURIComponent(`users/${id}`)}/reset`, { method: 'POST' });
    await until(async () => (await get(`${server.url}/proxy/users/x`)).headers['x-degraded'] === 'false', 3_000);
    await until(
      async () =>
        (await (await fetch(`${server.url}/metrics`)).text()).includes('circuitlog_proxy_panic{upstream="users"} 0'),
      3_000,
    );
    await until(async () => server.logs.some((l) => l.event === 'panic_left' && l.upstream === 'users'), 2_000); // the log line reaches the pipe a little after the state
  });

  it('without a panic threshold the same misconfiguration refuses every request (the difference is the policy)', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2', 'dc2-1', 'dc2-2');
    for (const n of Object.values(nodes))
      n.respond = (req) => (req.url === '/healthz' ? { status: 404 } : null) as never;
    const server = await launch(
      run,
      'failure_threshold: 2\ntimeout_seconds: 60\nhealth_check: { path: /healthz, interval_ms: 100, timeout_ms: 200 }',
    );
    await until(async () => Object.values(await states(server)).every((s) => s === 'open'), 5_000);
    const answers = await Promise.all(Array.from({ length: 6 }, () => get(`${server.url}/proxy/users/x`)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(503));
    expect(Object.values(nodes).map((n) => n.seen.filter((s) => s.url !== '/healthz').length)).toEqual([0, 0, 0, 0]);
  });

  it('the proxy is a caller (instance_id): with a quorum, its own failures isolate it from the node, which stays closed for everyone', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2');
    failRequests(nodes['dc1-1']!);
    const server = await launch(
      run,
      'failure_threshold: 2\ntimeout_seconds: 60\nretries: 0\nquorum: { min_callers: 2 }\nhealth_check: { enabled: false }',
      'instance_id: edge-7.dc1\n',
    );
    const circuit = `${server.url}/circuits/${encodeURIComponent('users/dc1-1')}`;
    const isolated = async () =>
      (await json<{ isolated_callers: { caller: string }[] }>(circuit)).isolated_callers.map((e) => e.caller);
    for (let i = 0; i < 8 && (await isolated()).length === 0; i++) await get(`${server.url}/proxy/users/x`);
    expect(await isolated()).toEqual(['edge-7.dc1']); // the proxy's own name, not an anonymous outcome
    expect((await states(server))['users/dc1-1']).toBe('closed'); // one caller is no quorum: not opened for everyone
    const reasons = (await events(server, 'users/dc1-1')).map((e) => e.reason);
    expect(reasons).toContain('trip_withheld');
    expect(reasons).toContain('caller_isolated');
    expect(reasons).not.toContain('failure_threshold_reached');
    const hitsBefore = nodes['dc1-1']!.seen.length;
    const after = await Promise.all(Array.from({ length: 10 }, () => get(`${server.url}/proxy/users/x`)));
    expect(after.map((a) => a.status)).toEqual(Array(10).fill(200)); // the proxy honours its isolation: the healthy node answers
    expect(nodes['dc1-1']!.seen.length).toBe(hitsBefore);
    const allowed = await fetch(`${circuit}/allowed?caller=other-host`);
    expect(allowed.status).toBe(200); // every other caller is still allowed
  });

  it('detect-only with a quorum: the proxy isolated under the force still sends to the node, marked X-Circuit-Would-Refuse: true', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2');
    failRequests(nodes['dc1-1']!);
    const server = await launch(
      run,
      'failure_threshold: 2\ntimeout_seconds: 60\nretries: 0\nforced_state: closed\nquorum: { min_callers: 2 }\nhealth_check: { enabled: false }',
      'instance_id: edge-7.dc1\n',
    );
    const answers: Answer[] = [];
    for (let i = 0; i < 12; i++) answers.push(await get(`${server.url}/proxy/users/x`));
    expect(answers.some((a) => a.status === 503)).toBe(false); // nothing refused under the force
    expect((await states(server))['users/dc1-1']).toBe('closed'); // withheld: one caller is no quorum
    const failing = answers.filter((a) => a.body.startsWith('boom'));
    expect(failing.length).toBeGreaterThanOrEqual(5); // still sent its share while the proxy is isolated from it
    // Its first two failures isolate the proxy (caller scope, not the circuit); every later answer from it is marked.
    expect(failing.slice(0, 2).map((a) => a.headers['x-circuit-would-refuse'])).toEqual([undefined, undefined]);
    expect(failing.slice(2).every((a) => a.headers['x-circuit-would-refuse'] === 'true')).toBe(true);
  });

  it('detect-only: a forced-closed node whose rules would refuse is forwarded, marked X-Circuit-Would-Refuse: true', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2');
    failRequests(nodes['dc1-1']!);
    const server = await launch(
      run,
      'failure_threshold: 2\ntimeout_seconds: 60\nretries: 0\nforced_state: closed\nhealth_check: { enabled: false }',
    );
    // Until two failures: the rules open the node (detect-only); nothing carries the mark yet.
    const before: Answer[] = [];
    while (before.filter((a) => a.body.startsWith('boom')).length < 2 && before.length < 12)
      before.push(await get(`${server.url}/proxy/users/x`));
    const firstTwo = before.filter((a) => a.body.startsWith('boom'));
    expect(firstTwo.map((a) => a.headers['x-circuit-would-refuse'])).toEqual([undefined, undefined]);
    // The opening is a write; with two workers on Redis the other learns it from the change
    // feed a moment later: the mark is checked once the server shows the node open.
    await until(async () => (await states(server))['users/dc1-1'] === 'open', 5_000); // by its rules
    const after: Answer[] = [];
    for (let i = 0; i < 10; i++) after.push(await get(`${server.url}/proxy/users/x`));
    const answers = [...before, ...after];
    expect(answers.some((a) => a.status === 503)).toBe(false); // nothing refused under the force
    const failing = after.filter((a) => a.body.startsWith('boom'));
    expect(failing.length).toBeGreaterThanOrEqual(3); // still sent its share after its rules opened it
    expect(failing.every((a) => a.headers['x-circuit-would-refuse'] === 'true')).toBe(true);
    expect(
      answers.filter((a) => a.status === 200).every((a) => a.headers['x-circuit-would-refuse'] === undefined),
    ).toBe(true);
  });
});
