import { afterEach, describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { startCapacityUpstream, type CapacityUpstream } from '../../bench/overload/capacity-upstream.mjs';
import { loopbackPool, openLoop } from '../../bench/overload/open-loop.mjs';
import { buildObservedApp, listen } from '../observe/observe-app.js';
import { proxyYaml, startNodes, type FakeNode } from './fake-node.js';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/**
 * A proxy with metrics over `nodes`, served on loopback. `realClock`: the adaptive limit
 * times real answers (the fake clock would make every latency 0).
 */
async function startProxy(
  nodes: Record<string, { readonly id: string; readonly url: string }>,
  extraYaml: string,
  realClock = false,
) {
  const config = parseConfigText(proxyYaml(nodes, extraYaml), 'test');
  const proxy = { localDc: config.local_dc!, upstreams: config.upstreams, client: createUndiciClient() };
  cleanup.push(() => proxy.client.close());
  const app = buildObservedApp({ deps: { proxy, ...(realClock ? { clock: Date.now } : {}) } });
  const server = await listen(app);
  cleanup.push(() => server.close());
  const get = async (path: string) => {
    const res = await fetch(`${server.url}${path}`);
    return { res, text: await res.text() };
  };
  return { app, get, url: server.url };
}

async function capacity(c: number, latencyMs: number): Promise<CapacityUpstream> {
  const up = await startCapacityUpstream({ capacity: c, latencyMs });
  cleanup.push(() => up.close());
  return up;
}

async function nodes(...ids: string[]): Promise<Record<string, FakeNode>> {
  const started = await startNodes(...ids);
  cleanup.push(() => Promise.all(Object.values(started).map((n) => n.stop())));
  return started;
}

describe('concurrency limit (proxy)', () => {
  it('answers 503 concurrency-limited with Retry-After over a fixed limit, and counts the refusal', async () => {
    const n = await nodes('dc1-1');
    n['dc1-1']!.mode = 'hang';
    const { app, get, url } = await startProxy(n, 'request_timeout_ms: 500\nconcurrency: { limit: fixed, max: 2 }');
    const slow = [fetch(`${url}/proxy/users/a`), fetch(`${url}/proxy/users/b`)];
    await until(async () => (await app.scrape()).get('circuitlog_proxy_in_flight{upstream="users"}') === 2);
    const { res, text } = await get('/proxy/users/c');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    expect(JSON.parse(text)).toMatchObject({
      code: 'CONCURRENCY_LIMITED',
      type: expect.stringContaining('concurrency-limited'),
    });
    const m = await app.scrape();
    expect(m.get('circuitlog_proxy_shed_total{upstream="users",reason="limit"}')).toBe(1);
    expect(m.get('circuitlog_proxy_concurrency_limit{upstream="users"}')).toBe(2);
    await Promise.all(slow.map(async (p) => (await p).text()));
  });

  it('lets requests over the limit wait up to queue_ms for a slot instead of refusing them', async () => {
    const up = await capacity(10, 50);
    const { get } = await startProxy(
      { n: { id: 'dc1-1', url: up.url } },
      'health_check: { enabled: false }\nconcurrency: { limit: fixed, max: 1, queue_ms: 5000 }',
    );
    const answers = await Promise.all(['a', 'b', 'c', 'd'].map((p) => get(`/proxy/users/${p}`)));
    expect(answers.map((a) => a.res.status)).toEqual([200, 200, 200, 200]);
    expect(up.stats().served).toBe(4);
    expect(up.stats().maxInService).toBe(1); // one at a time: the others waited in the proxy
  });

  it('refuses a waiter after queue_ms, and one past max_queue at once', async () => {
    const n = await nodes('dc1-1');
    n['dc1-1']!.mode = 'hang';
    const { app, get, url } = await startProxy(
      n,
      'request_timeout_ms: 2000\nconcurrency: { limit: fixed, max: 1, queue_ms: 100, max_queue: 1 }',
    );
    const held = fetch(`${url}/proxy/users/a`);
    await until(async () => (await app.scrape()).get('circuitlog_proxy_in_flight{upstream="users"}') === 1);
    const late = async () => {
      await new Promise((r) => setTimeout(r, 20)); // after b has joined the queue
      return get('/proxy/users/c');
    };
    const [waiter, over] = await Promise.all([get('/proxy/users/b'), late()]);
    expect(waiter.res.status).toBe(503);
    expect(over.res.status).toBe(503);
    const m = await app.scrape();
    expect(m.get('circuitlog_proxy_shed_total{upstream="users",reason="queue_timeout"}')).toBe(1);
    expect(m.get('circuitlog_proxy_shed_total{upstream="users",reason="queue_full"}')).toBe(1);
    await (await held).text();
  });

  it('keeps max_concurrent as it was: 503 bulkhead-full', async () => {
    const n = await nodes('dc1-1');
    n['dc1-1']!.mode = 'hang';
    const { app, get, url } = await startProxy(n, 'request_timeout_ms: 500\nmax_concurrent: 1');
    const held = fetch(`${url}/proxy/users/a`);
    await until(async () => (await app.scrape()).get('circuitlog_proxy_in_flight{upstream="users"}') === 1);
    const { res, text } = await get('/proxy/users/b');
    expect(res.status).toBe(503);
    expect(JSON.parse(text).code).toBe('BULKHEAD_FULL');
    await (await held).text();
  });

  it('with the adaptive limit, 3x an upstream capacity keeps its queue short and refuses the excess; with no limit the queue grows', async () => {
    // C = 8 at 50 ms (160 answers/s), offered 480/s for 2 s, open loop. Counts, not times:
    // how long the upstream's own queue got, and how many were refused.
    const run = async (block: string) => {
      const up = await capacity(8, 50);
      const { url } = await startProxy(
        { n: { id: 'dc1-1', url: up.url } },
        `failure_threshold: 1000000\nrequest_timeout_ms: 10000\nhealth_check: { enabled: false }\n${block}`,
        true,
      );
      const pool = loopbackPool(url);
      cleanup.push(() => pool.close());
      const r = await openLoop({
        pool,
        path: '/proxy/users/x',
        ratePerSecond: 480,
        durationMs: 2_000,
        maxOutstanding: 2_000,
      });
      return { r, stats: up.stats() };
    };
    const limited = await run('concurrency: { limit: adaptive, initial: 8, min: 2, max: 200 }');
    expect(limited.r.errors).toBe(0);
    expect(limited.r.statuses[503]).toBeGreaterThan(0.3 * limited.r.sent); // about 2/3 of 3x is excess
    expect((limited.r.statuses[200] ?? 0) + (limited.r.statuses[503] ?? 0)).toBe(limited.r.answered);
    expect(limited.stats.maxQueued).toBeLessThanOrEqual(16); // the limit stays near C = 8
    const open = await run('');
    expect(open.r.statuses[503] ?? 0).toBe(0);
    expect(open.stats.maxQueued).toBeGreaterThan(100);
  });

  it('does not shrink the limit at half an upstream capacity', async () => {
    // The zero-refusal proof is simulated (overload/ramp.test.ts: "refuses nothing at a steady
    // half-capacity load over 30 s"); here the real proxy, upstream and load generator share
    // one test process, and a pause of it piles arrivals up past any limit. What must hold:
    // the limit never shrinks under a load the upstream takes, so refusals stay rare.
    const up = await capacity(8, 50);
    const { app, url } = await startProxy(
      { n: { id: 'dc1-1', url: up.url } },
      'health_check: { enabled: false }\nconcurrency: { limit: adaptive }',
      true,
    );
    const pool = loopbackPool(url);
    cleanup.push(() => pool.close());
    const r = await openLoop({ pool, path: '/proxy/users/x', ratePerSecond: 80, durationMs: 3_000 });
    expect(r.sent).toBeGreaterThan(150);
    expect((r.statuses[200] ?? 0) + (r.statuses[503] ?? 0)).toBe(r.sent);
    expect(r.statuses[503] ?? 0).toBeLessThanOrEqual(0.05 * r.sent);
    expect((await app.scrape()).get('circuitlog_proxy_concurrency_limit{upstream="users"}')).toBeGreaterThanOrEqual(20);
  });
});

describe('retry budget (proxy)', () => {
  it('with every node failing, retries add at most percent plus the floor to the upstream traffic', async () => {
    // 200 GETs, each failing on its first node: `retries: 1` alone would send 400 node
    // requests. The default budget allows 3/s x 10 s = 30 retries plus 20% of 200 = 40.
    const n = await nodes('dc1-1', 'dc1-2');
    for (const node of Object.values(n)) node.mode = 'fail';
    const { app, get } = await startProxy(
      n,
      'failure_threshold: 1000000\nretries: 1\nhealth_check: { enabled: false }',
    );
    for (let i = 0; i < 200; i++) expect((await get(`/proxy/users/${i}`)).res.status).toBe(500);
    const hits = n['dc1-1']!.hits + n['dc1-2']!.hits;
    expect(hits).toBe(200 + 30 + 40);
    const m = await app.scrape();
    expect(m.get('circuitlog_proxy_retries_total{upstream="users",result="sent"}')).toBe(70);
    expect(m.get('circuitlog_proxy_retries_total{upstream="users",result="budget_exhausted"}')).toBe(130);
  });

  it("answers a retry the budget refuses with the first attempt's answer, the other node untouched", async () => {
    const n = await nodes('dc1-1', 'dc1-2');
    for (const node of Object.values(n)) node.mode = 'fail';
    const { get } = await startProxy(n, 'retries: 1\nretry_budget: { percent: 0, min_per_second: 0 }');
    const { res, text } = await get('/proxy/users/a');
    expect(res.status).toBe(500);
    const first = res.headers.get('x-node')!;
    expect(text).toBe(`boom from ${first}`);
    expect(n['dc1-1']!.hits + n['dc1-2']!.hits).toBe(1);
  });

  it('answers a retry the budget refuses with the fallback when the first attempt timed out', async () => {
    const n = await nodes('dc1-1', 'dc1-2');
    for (const node of Object.values(n)) node.mode = 'hang';
    const { get } = await startProxy(
      n,
      'request_timeout_ms: 200\nretries: 1\nretry_budget: { percent: 0, min_per_second: 0 }\nfallback: { static: { body: "later" } }',
    );
    const { res, text } = await get('/proxy/users/a');
    expect(res.headers.get('x-fallback')).toBe('static');
    expect(text).toBe('later');
    expect(n['dc1-1']!.hits + n['dc1-2']!.hits).toBe(1);
  });
});

/** Poll an async condition (no time bound of its own: the test's timeout is the limit). */
async function until(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((resolve) => setTimeout(resolve, 10));
}
