import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { parseConfigText } from '../../src/config.js';
import { createHealthChecker } from '../../src/proxy/health-checker.js';
import { createUndiciClient } from '../../src/proxy/upstream-client.js';
import { silentLogger } from '../helper.js';
import { FakeNode, proxyYaml, startNodes } from '../proxy/fake-node.js';
import type { Metrics } from '../../src/observe/metrics.js';
import { buildObservedApp, listen } from './observe-app.js';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

/** A proxy over fake nodes dc1-1 and dc2-1 with metrics on, served on loopback. */
async function startObservedProxy(extraYaml: string, nodes: Record<string, FakeNode> = {}) {
  if (Object.keys(nodes).length === 0) nodes = await startNodes('dc1-1', 'dc2-1');
  cleanup.push(() => Promise.all(Object.values(nodes).map((n) => n.stop())));
  const config = parseConfigText(proxyYaml(nodes, `request_timeout_ms: 500\nretries: 0\n${extraYaml}`), 'test');
  let metrics: Metrics | undefined; // the app's, once built
  const onCoalesced = (upstream: string) => metrics?.proxyCoalesced(upstream);
  const proxy = { localDc: config.local_dc!, upstreams: config.upstreams, client: createUndiciClient(), onCoalesced };
  cleanup.push(() => proxy.client.close());
  const app = buildObservedApp({ deps: { proxy } });
  metrics = app.observe.metrics;
  const server = await listen(app);
  cleanup.push(() => server.close());
  const get = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${server.url}${path}`, init);
    await res.text();
    return res;
  };
  return { app, nodes, proxy, get, url: server.url };
}

describe('proxy metrics', () => {
  it('counts each proxied request by the status sent and the node that answered, with its duration', async () => {
    const { app, nodes, get } = await startObservedProxy('');
    expect((await get('/proxy/users/a')).status).toBe(200);
    nodes['dc1-1']!.mode = 'fail';
    expect((await get('/proxy/users/b')).status).toBe(500); // no retries: the node's 500 goes back as sent
    const m = await app.scrape();
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="dc1-1",dc="dc1",status="200"}')).toBe(1);
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="dc1-1",dc="dc1",status="500"}')).toBe(1);
    expect(m.get('circuitlog_proxy_request_duration_seconds_count{upstream="users",node="dc1-1"}')).toBe(2);
    // The proxy's node outcomes are outcomes too.
    expect(m.get('circuitlog_outcomes_total{circuit="users/dc1-1",kind="success",outcome="success"}')).toBe(1);
    expect(m.get('circuitlog_outcomes_total{circuit="users/dc1-1",kind="failure",outcome="failure"}')).toBe(1);
    // Each carries its attempt's duration (dispatch to body end), so the histogram sees both.
    expect(m.get('circuitlog_outcome_duration_seconds_count{circuit="users/dc1-1"}')).toBe(2);
  });

  it('counts answers from another DC as degraded', async () => {
    const { app, get } = await startObservedProxy('');
    for (let i = 0; i < 3; i++) app.breaker.record('users/dc1-1', { success: false });
    expect((await get('/proxy/users/a')).headers.get('x-degraded')).toBe('true');
    expect((await get('/proxy/users/b')).status).toBe(200);
    const m = await app.scrape();
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="dc2-1",dc="dc2",status="200"}')).toBe(2);
    expect(m.get('circuitlog_proxy_degraded_total{upstream="users"}')).toBe(2);
  });

  it('counts a request no node answered under node and dc "none", and a fallback by kind', async () => {
    const { app, get } = await startObservedProxy('fallback: { static: { status: 503, body: "later" } }');
    for (const id of ['dc1-1', 'dc2-1'])
      for (let i = 0; i < 3; i++) app.breaker.record(`users/${id}`, { success: false });
    expect((await get('/proxy/users/a')).status).toBe(503);
    const m = await app.scrape();
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="none",dc="none",status="503"}')).toBe(1);
    expect(m.get('circuitlog_proxy_fallbacks_total{upstream="users",kind="static"}')).toBe(1);
    expect(m.get('circuitlog_proxy_degraded_total{upstream="users"}')).toBe(1);
    expect(m.get('circuitlog_calls_rejected_total{circuit="users/dc1-1"}')).toBeGreaterThanOrEqual(1); // the proxy's pick was refused
  });

  it('counts a problem answer with its status when there is no fallback', async () => {
    const { app, get } = await startObservedProxy('');
    for (const id of ['dc1-1', 'dc2-1'])
      for (let i = 0; i < 3; i++) app.breaker.record(`users/${id}`, { success: false });
    const res = await get('/proxy/users/a');
    expect(res.status).toBe(503);
    expect(
      (await app.scrape()).get('circuitlog_proxy_requests_total{upstream="users",node="none",dc="none",status="503"}'),
    ).toBe(1);
  });

  it('counts a timeout with the 504 sent, and a caller who hung up as 499', async () => {
    const { app, nodes, get } = await startObservedProxy('');
    for (const n of Object.values(nodes)) n.mode = 'hang';
    expect((await get('/proxy/users/slow')).status).toBe(504);
    const caller = new AbortController();
    const gone = get('/proxy/users/gone', { signal: caller.signal }).catch(() => null);
    while (Object.values(nodes).reduce((n, node) => n + node.hits, 0) < 2) await new Promise((r) => setTimeout(r, 10));
    caller.abort();
    await gone;
    let m = await app.scrape();
    while (!m.has('circuitlog_proxy_requests_total{upstream="users",node="none",dc="none",status="499"}')) {
      await new Promise((r) => setTimeout(r, 10));
      m = await app.scrape();
    }
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="none",dc="none",status="504"}')).toBe(1);
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="none",dc="none",status="499"}')).toBe(1);
  });

  it('counts coalesced followers, each with the status and node of the answer it got', async () => {
    const { app, nodes, get } = await startObservedProxy('coalesce: { enabled: true }');
    let open = () => {};
    nodes['dc1-1']!.gate = new Promise<void>((resolve) => (open = resolve));
    const answers = Array.from({ length: 5 }, () => get('/proxy/users/same'));
    while (nodes['dc1-1']!.hits < 1) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 100)); // the other four join the first one's call
    open();
    expect((await Promise.all(answers)).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const m = await app.scrape();
    const coalesced = m.get('circuitlog_proxy_coalesced_total{upstream="users"}') ?? 0;
    expect(coalesced).toBeGreaterThan(0);
    expect(nodes['dc1-1']!.hits).toBe(5 - coalesced);
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="dc1-1",dc="dc1",status="200"}')).toBe(5);
  });

  it('never labels an upstream that is not configured', async () => {
    const { app, get } = await startObservedProxy('');
    expect((await get('/proxy/nope/a')).status).toBe(404);
    expect([...(await app.scrape()).keys()].some((k) => k.includes('upstream="nope"'))).toBe(false);
  });

  it('counts health checks by node and result', async () => {
    const { app, nodes, proxy } = await startObservedProxy('');
    nodes['dc2-1']!.mode = 'fail';
    const health = createHealthChecker({
      ...proxy,
      breaker: app.breaker,
      logger: silentLogger,
      hooks: app.observe.proxyHooks,
    });
    await health.checkOnce();
    const m = await app.scrape();
    expect(m.get('circuitlog_health_checks_total{upstream="users",node="dc1-1",result="success"}')).toBe(1);
    expect(m.get('circuitlog_health_checks_total{upstream="users",node="dc2-1",result="failure"}')).toBe(1);
  });

  it("counts each WebSocket upgrade with the status sent: 101, a node's refusal, or a problem", async () => {
    const wss = new WebSocketServer({
      host: '127.0.0.1',
      port: 0,
      verifyClient: (info, done) => (info.req.url?.includes('refuse') ? done(false, 403) : done(true)),
    });
    await once(wss, 'listening');
    cleanup.push(() => new Promise((resolve) => wss.close(resolve)));
    cleanup.push(async () => {
      for (const c of wss.clients) c.terminate();
    });
    const [fake] = Object.values(await startNodes('dc2-1'));
    const wsNode = new FakeNode('dc1-1'); // never started: only its url, pointing at the WebSocket server
    wsNode.port = (wss.address() as AddressInfo).port;
    const { app, url } = await startObservedProxy('health_check: { enabled: false }', {
      'dc1-1': wsNode,
      'dc2-1': fake!,
    });
    expect(await upgradeStatus(url, '/proxy/users/chat')).toBe(101);
    expect(await upgradeStatus(url, '/proxy/users/refuse')).toBe(403); // not a failure status: relayed as sent
    for (const id of ['dc1-1', 'dc2-1'])
      for (let i = 0; i < 3; i++) app.breaker.record(`users/${id}`, { success: false });
    expect(await upgradeStatus(url, '/proxy/users/chat')).toBe(503); // every circuit open: a problem, no node
    expect(await upgradeStatus(url, '/proxy/nope/chat')).toBe(404); // no such upstream: not labelled
    const m = await app.scrape();
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="dc1-1",dc="dc1",status="101"}')).toBe(1);
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="dc1-1",dc="dc1",status="403"}')).toBe(1);
    expect(m.get('circuitlog_proxy_requests_total{upstream="users",node="none",dc="none",status="503"}')).toBe(1);
    expect(m.get('circuitlog_proxy_request_duration_seconds_count{upstream="users",node="dc1-1"}')).toBe(2);
    expect([...m.keys()].some((k) => k.includes('upstream="nope"'))).toBe(false);
  });
});

/** The status a WebSocket handshake through the proxy got (101 once open; else the answer's). */
async function upgradeStatus(base: string, path: string): Promise<number> {
  const ws = new WebSocket(`${base.replace('http', 'ws')}${path}`);
  ws.on('error', () => {});
  const status = await new Promise<number>((resolve) => {
    ws.once('open', () => resolve(101));
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
  });
  ws.terminate();
  return status;
}
