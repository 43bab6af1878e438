import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { proxyYaml, startNodes, type FakeNode } from '../proxy/fake-node.js';
import { openStream } from '../observe/sse-client.js';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { requestJson } from '../fresh-request.js';
import { cursorAfter } from '../redis/http.js';

// Two circuitlog processes on different ports sharing one real redis-server: two hosts.
let redis: RedisServer;
let db = 0;
const running: ServerProcess[] = [];
const nodes: FakeNode[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.killGroup()));
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(async () => {
  await redis.stop();
});

/** Two hosts on a fresh Redis database (the `/db` of the URL keeps tests apart). */
async function twoHosts(yaml = ''): Promise<[ServerProcess, ServerProcess]> {
  db++;
  const env: Record<string, string> = { CIRCUITLOG_STORE: redis.url(db) };
  if (yaml !== '') {
    const file = path.join(tempDir(), 'c.yaml');
    fs.writeFileSync(file, yaml);
    env.CIRCUITLOG_CONFIG = file;
  }
  const hosts = await Promise.all([startServer(env, { detached: true }), startServer(env, { detached: true })]);
  running.push(...hosts);
  return hosts as [ServerProcess, ServerProcess];
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

const request = (url: string, method = 'GET', body?: unknown) => requestJson(url, method, body, agent);

/** Poll (bounded) until `check` holds; what is asserted afterwards is the value, not the time. */
async function until(check: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('two hosts on one Redis', () => {
  it('count 2,000 concurrent failures split between them exactly, on a high threshold', async () => {
    const [a, b] = await twoHosts('circuit_defaults:\n  failure_threshold: 100000\n');
    const answers = await Promise.all(
      Array.from({ length: 2_000 }, (_, i) => request(`${(i % 2 ? a : b).url}/circuits/pay/failure`, 'POST', {})),
    );
    expect(answers.filter((r) => r.status !== 200)).toEqual([]);
    for (const host of [a, b]) {
      await until(
        async () => (await request(`${host.url}/circuits/pay`)).json.failure_count === 2_000,
        'both hosts to show 2,000',
      );
      expect((await request(`${host.url}/circuits/pay`)).json).toMatchObject({ state: 'closed', failure_count: 2_000 });
    }
  });

  it('make exactly one transition at the threshold, and admit exactly half_open_max_calls probes across both', async () => {
    const [a, b] = await twoHosts(
      'circuit_defaults:\n  failure_threshold: 1000\n  timeout_seconds: 1\n  half_open_max_calls: 3\n',
    );
    const answers = await Promise.all(
      Array.from({ length: 2_000 }, (_, i) =>
        request(`${(i % 2 ? a : b).url}/circuits/pay/outcomes`, 'POST', { success: false }),
      ),
    );
    expect(answers.filter((r) => r.status !== 200)).toEqual([]);
    const circuit = (await request(`${b.url}/circuits/pay`)).json;
    expect(circuit).toMatchObject({ state: 'open', failure_count: 2_000 });
    const { events } = (await request(`${a.url}/circuits/pay/events`)).json;
    expect(events).toEqual([
      expect.objectContaining({ from: 'closed', to: 'open', reason: 'failure_threshold_reached' }),
    ]);

    await new Promise((r) => setTimeout(r, Date.parse(circuit.open_until) - Date.now() + 50)); // its open time, 1 s
    const probes = await Promise.all(
      Array.from({ length: 200 }, (_, i) => request(`${(i % 2 ? a : b).url}/circuits/pay/allowed`)),
    );
    expect(probes.filter((r) => r.status === 200)).toHaveLength(3);
    expect(probes.filter((r) => r.status === 503)).toHaveLength(197);
  });

  it('see a trip made on the other host, and a reset, within a second', async () => {
    const [a, b] = await twoHosts('circuit_defaults:\n  failure_threshold: 1\n');
    expect((await request(`${b.url}/circuits/gw/allowed`)).status).toBe(200); // b holds it in its cache now
    let started = Date.now();
    await request(`${a.url}/circuits/gw/failure`, 'POST', {});
    await until(async () => (await request(`${b.url}/circuits/gw/allowed`)).status === 503, 'b to refuse', 1_000);
    const tripLagMs = Date.now() - started;
    started = Date.now();
    await request(`${a.url}/circuits/gw/reset`, 'POST');
    await until(async () => (await request(`${b.url}/circuits/gw/allowed`)).status === 200, 'b to admit again', 1_000);
    const resetLagMs = Date.now() - started;
    process.stdout.write(`cross-host lag: trip ${tripLagMs} ms, reset ${resetLagMs} ms (includes one request each)\n`);
  });

  it('stream a transition made on one host to /events/stream on the other within 1 s, and replay it by Last-Event-ID', async () => {
    const [a, b] = await twoHosts('circuit_defaults:\n  failure_threshold: 1\n');
    const stream = await openStream(`${b.url}/events/stream?prefix=gw`);
    try {
      expect(stream.status).toBe(200);
      await request(`${a.url}/circuits/gw-0/failure`, 'POST', {}); // a transition before: the replay resumes after its id
      const before = await stream.next(1_000);
      await request(`${a.url}/circuits/gw-1/failure`, 'POST', {});
      const event = await stream.next(1_000); // fails the test if it takes longer
      expect(event).toMatchObject({
        event: 'transition',
        data: { circuit: 'gw-1', from: 'closed', to: 'open', reason: 'failure_threshold_reached' },
      });
      await request(`${b.url}/circuits/gw-1/reset`, 'POST');
      const reset = await stream.next(1_000);
      expect(cursorAfter(reset.rawId, event.rawId)).toBe(true); // ids are cursors over the shards (docs/many-hosts.md)
      const replay = await openStream(`${a.url}/events/stream?circuit=gw-1`, { 'last-event-id': before.rawId });
      try {
        expect((await replay.next(1_000)).data).toMatchObject(event.data);
        expect((await replay.next(1_000)).data).toMatchObject(reset.data);
      } finally {
        replay.close();
      }
    } finally {
      stream.close();
    }
  });

  it('agree on the state gauges of /metrics, whichever host made the change', async () => {
    const [a, b] = await twoHosts('circuit_defaults:\n  failure_threshold: 1\n');
    await request(`${a.url}/circuits/m-open/failure`, 'POST', {});
    await request(`${a.url}/circuits/m-closed/success`, 'POST', {});
    const gauge = async (host: ServerProcess) => {
      const text = await (await fetch(`${host.url}/metrics`)).text();
      return text
        .split('\n')
        .filter(
          (l) => l.startsWith('circuitlog_circuits{') || l.startsWith('circuitlog_circuit_state{circuit="m-open"'),
        )
        .join('\n');
    };
    await until(async () => (await gauge(b)) === (await gauge(a)), 'both hosts to show the same gauges');
    const text = await gauge(b);
    expect(text).toContain('circuitlog_circuits{state="open"} 1');
    expect(text).toContain('circuitlog_circuits{state="closed"} 1');
    expect(text).toContain('circuitlog_circuit_state{circuit="m-open",state="open"} 1');
  });

  it('run the health checks on one host only, even with one process per host; the other takes over when it dies', async () => {
    const { 'dc1-a': node } = await startNodes('dc1-a');
    nodes.push(node!);
    const [a, b] = await twoHosts(proxyYaml({ 'dc1-a': node! }, 'health_check: { interval_ms: 100, timeout_ms: 500 }'));
    const leaders = () => [a, b].filter((h) => h.logs.some((l) => l.event === 'lease_acquired'));
    await until(async () => leaders().length === 1, 'one health-check leader');
    await new Promise((r) => setTimeout(r, 500));
    expect(leaders()).toHaveLength(1);
    const [leader] = leaders();
    const other = leader === a ? b : a;
    await leader!.killGroup();
    await until(async () => other.logs.some((l) => l.event === 'lease_acquired'), 'the other host to take over', 8_000);
    const before = node!.healthChecks;
    await until(async () => node!.healthChecks > before, 'checks from the new leader');
  });
});
