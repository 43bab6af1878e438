import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startNodes, proxyYaml, type FakeNode } from '../proxy/fake-node.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { requestJson } from '../fresh-request.js';

const running: ServerProcess[] = [];
const nodes: FakeNode[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});

async function start(env: Record<string, string>, stopAfterTest = true) {
  const server = await startServer({ CIRCUITLOG_WORKERS: '2', ...env }, { detached: true });
  if (stopAfterTest) running.push(server);
  // The primary's line can overtake the workers' own: they write to one pipe from three processes.
  await waitFor(() => pids(server, 'worker_listening').size === 2, 5_000, 'both workers to log that they listen');
  return server;
}

function writeConfig(dir: string, yaml: string): string {
  const file = path.join(dir, 'circuitlog.yaml');
  fs.writeFileSync(file, yaml);
  return file;
}

const request = (url: string, method = 'GET', body?: unknown) => requestJson(url, method, body);

const pids = (server: ServerProcess, event: string) =>
  new Set(server.logs.filter((l) => l.event === event).map((l) => l.pid as number));

async function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const patch = async (url: string, policy: Record<string, unknown>) =>
  expect((await request(url, 'PATCH', policy)).status).toBeLessThan(300);

describe('several workers on one database file', () => {
  // One two-worker server for the tests that need nothing else of it: each uses its own circuit
  // (and sets that circuit's policy with PATCH), and counts only its own circuit's log lines.
  let shared: ServerProcess;
  beforeAll(async () => {
    shared = await start(
      { CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite'), CIRCUITLOG_LOG_LEVEL: 'debug' }, // refusals are logged at debug only
      false,
    );
  });
  afterAll(async () => {
    await shared?.killGroup();
  });

  it('serves from N processes on one port', async () => {
    const server = shared;
    expect(pids(server, 'worker_listening').size).toBe(2);
    expect(server.logs.find((l) => l.event === 'listening')).toMatchObject({ workers: 2 });
  });

  it('shows a failure recorded through one worker to the next request on any worker', async () => {
    const server = shared;
    for (let i = 1; i <= 12; i++) {
      expect((await request(`${server.url}/circuits/svc/failure`, 'POST')).json.failure_count).toBe(i);
      // Alternating fresh connections land on alternating workers (round-robin).
      expect((await request(`${server.url}/circuits/svc`)).json.failure_count).toBe(i);
      expect((await request(`${server.url}/circuits/svc`)).json.failure_count).toBe(i);
    }
  });

  it('keeps counts exact under concurrency and logs one transition at the threshold', async () => {
    const server = shared;
    await patch(`${server.url}/circuits/hot`, { failure_threshold: 150 });
    const answers = await Promise.all(
      Array.from({ length: 300 }, () => request(`${server.url}/circuits/hot/outcomes`, 'POST', { success: false })),
    );
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const circuit = (await request(`${server.url}/circuits/hot`)).json;
    expect(circuit).toMatchObject({ state: 'open', failure_count: 300 });
    expect((await request(`${server.url}/circuits/hot/events`)).json.events).toHaveLength(1);
    const transitions = () => server.logs.filter((l) => l.event === 'transition' && l.circuit === 'hot');
    await waitFor(() => transitions().length > 0, 2_000, 'the transition log line');
    expect(transitions()).toHaveLength(1);
  });

  it('admits exactly half_open_max_calls probes across all workers', async () => {
    const server = shared;
    await patch(`${server.url}/circuits/probe`, { failure_threshold: 1, timeout_seconds: 1, half_open_max_calls: 2 });
    await request(`${server.url}/circuits/probe/failure`, 'POST');
    await new Promise((r) => setTimeout(r, 1_050)); // the 1 s open time, the shortest there is
    const answers = await Promise.all(
      Array.from({ length: 40 }, () => request(`${server.url}/circuits/probe/allowed`)),
    );
    expect(answers.filter((a) => a.status === 200)).toHaveLength(2);
    expect(answers.filter((a) => a.status === 503)).toHaveLength(38);
    const refusers = () =>
      new Set(
        server.logs
          .filter((l) => l.event === 'request_failed' && l.path === '/circuits/probe/allowed')
          .map((l) => l.pid as number),
      );
    await waitFor(() => refusers().size === 2, 2_000, 'refusals logged by both workers');
  });

  it('runs health checks in exactly one worker, and another takes over when it dies', async () => {
    const dir = tempDir();
    const { 'dc1-a': a } = await startNodes('dc1-a');
    nodes.push(a!);
    const server = await start({
      CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
      CIRCUITLOG_CONFIG: writeConfig(
        dir,
        proxyYaml({ 'dc1-a': a! }, 'health_check: { interval_ms: 100, timeout_ms: 500 }'),
      ),
    });
    await waitFor(() => server.logs.some((l) => l.event === 'lease_acquired'), 5_000, 'a health-check leader');
    const [leader] = pids(server, 'lease_acquired');
    const before = a!.healthChecks;
    await new Promise((r) => setTimeout(r, 1_000));
    // One checker at 100 ms: about 10 checks a second; two would make about 20.
    expect(a!.healthChecks - before).toBeGreaterThanOrEqual(5);
    expect(a!.healthChecks - before).toBeLessThanOrEqual(14);
    expect(pids(server, 'lease_acquired').size).toBe(1);

    process.kill(leader!, 'SIGKILL');
    await waitFor(() => pids(server, 'lease_acquired').size === 2, 8_000, 'another worker to take over');
    await waitFor(
      () => server.logs.some((l) => l.event === 'worker_crashed' && l.worker_pid === leader),
      2_000,
      'the crash log',
    );
    const afterTakeover = a!.healthChecks;
    await waitFor(() => a!.healthChecks > afterTakeover, 5_000, 'the new leader to check the node');
    expect(a!.healthChecks).toBeGreaterThan(afterTakeover);
  });

  it('replaces a crashed worker and keeps serving', async () => {
    const server = await start({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
    const [victim] = pids(server, 'worker_listening');
    process.kill(victim!, 'SIGKILL');
    await waitFor(() => pids(server, 'worker_listening').size === 3, 5_000, 'a replacement worker');
    expect(server.logs.find((l) => l.event === 'worker_crashed')).toMatchObject({
      worker_pid: victim,
      signal: 'SIGKILL',
    });
    for (let i = 0; i < 6; i++) expect((await request(`${server.url}/health`)).status).toBe(200);
  });

  it('drains in-flight requests and stops every worker on SIGTERM', async () => {
    const dir = tempDir();
    let arrived = 0;
    // A node that answers 800 ms after a request arrives.
    const slow = http.createServer((_req, res) => {
      arrived++;
      setTimeout(() => res.end('late but fine'), 800);
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
    try {
      const server = await start({
        CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
        CIRCUITLOG_CONFIG: writeConfig(
          dir,
          `local_dc: dc1\nupstreams:\n  slow:\n    nodes: [{ id: n1, dc: dc1, url: "${url}" }]\n    health_check: { enabled: false }\n`,
        ),
      });
      const workers = [...pids(server, 'worker_listening')];
      const inFlight = request(`${server.url}/proxy/slow/x`);
      await waitFor(() => arrived === 1, 2_000, 'the request to reach the node');
      const exited = server.stop('SIGTERM');
      expect((await inFlight).status).toBe(200);
      expect(await exited).toBe(0);
      for (const pid of workers) expect(() => process.kill(pid, 0)).toThrow();
    } finally {
      slow.close();
    }
  });
});
