import { describe, expect, it } from 'vitest';
import { useProxyFixture, type ProxyApp } from './proxy-app.js';

const fixture = useProxyFixture();

function setup(extra = 'timeout_seconds: 5\nrequest_timeout_ms: 300') {
  return fixture.start(['dc1-1', 'dc1-2', 'dc2-1', 'dc2-2'], extra);
}

async function getMany(app: ProxyApp, count: number) {
  const answers = [];
  for (let i = 0; i < count; i++) answers.push(await app.get(`/proxy/users/api/items?i=${i}`));
  return answers;
}

describe('node selection and failover', () => {
  it('keeps traffic in the local DC, spread round-robin over its nodes', async () => {
    const app = await setup();
    const answers = await getMany(app, 10);
    expect(answers.map((a) => a.res.status)).toEqual(Array(10).fill(200));
    expect(
      answers.every((a) => a.res.headers.get('x-dc') === 'dc1' && a.res.headers.get('x-degraded') === 'false'),
    ).toBe(true);
    expect([fixture.nodes['dc1-1']!.hits, fixture.nodes['dc1-2']!.hits]).toEqual([5, 5]);
    expect(fixture.nodes['dc2-1']!.hits + fixture.nodes['dc2-2']!.hits).toBe(0);
  });

  it('fails over to dc2 with no client error when dc1 goes down', async () => {
    const app = await setup();
    await fixture.nodes['dc1-1']!.stop();
    await fixture.nodes['dc1-2']!.stop();
    const answers = await getMany(app, 12);
    expect(answers.map((a) => a.res.status)).toEqual(Array(12).fill(200));
    expect(new Set(answers.map((a) => a.res.headers.get('x-dc')))).toEqual(new Set(['dc2']));
    expect(answers.every((a) => a.res.headers.get('x-degraded') === 'true')).toBe(true);
    expect((await app.breaker.get('users/dc1-1'))?.state).toBe('open');
    expect((await app.breaker.get('users/dc1-2'))?.state).toBe('open');
  });

  it('moves traffic back to dc1 once its open time passes and a health check succeeds', async () => {
    const app = await setup();
    await fixture.nodes['dc1-1']!.stop();
    await fixture.nodes['dc1-2']!.stop();
    await getMany(app, 8);
    await fixture.nodes['dc1-1']!.start();
    await fixture.nodes['dc1-2']!.start();
    expect((await app.get('/proxy/users/x')).res.headers.get('x-dc')).toBe('dc2'); // still open
    app.clock.advance(5_000); // timeout_seconds
    await app.health.checkOnce();
    expect((await app.breaker.get('users/dc1-1'))?.state).toBe('closed');
    const answers = await getMany(app, 4);
    expect(answers.every((a) => a.res.headers.get('x-dc') === 'dc1' && a.res.status === 200)).toBe(true);
  });

  it('sends only the probe to a half-open node and closes it on success', async () => {
    const app = await setup();
    for (let i = 0; i < 3; i++) app.breaker.record('users/dc1-1', { success: false });
    app.clock.advance(5_000);
    const before = fixture.nodes['dc1-1']!.hits;
    const answers = await getMany(app, 6);
    expect(answers.every((a) => a.res.status === 200)).toBe(true);
    expect(fixture.nodes['dc1-1']!.hits - before).toBeGreaterThanOrEqual(1);
    expect((await app.breaker.get('users/dc1-1'))?.state).toBe('closed');
  });

  it('answers 503 with Retry-After at once, contacting no node, when every circuit is open', async () => {
    const app = await setup();
    for (const id of Object.keys(fixture.nodes))
      for (let i = 0; i < 3; i++) app.breaker.record(`users/${id}`, { success: false });
    app.clock.advance(2_000);
    const { res, text } = await app.get('/proxy/users/x');
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(res.headers.get('retry-after')).toBe('3');
    expect(JSON.parse(text).code).toBe('NO_NODE_AVAILABLE');
    expect(Object.values(fixture.nodes).reduce((n, node) => n + node.hits, 0)).toBe(0);
  });

  it('answers 504 within the timeout budget when nodes hang', async () => {
    const app = await setup();
    for (const node of Object.values(fixture.nodes)) node.mode = 'hang';
    const started = Date.now();
    const { res, text } = await app.get('/proxy/users/slow');
    expect(res.status).toBe(504);
    expect(JSON.parse(text).code).toBe('UPSTREAM_TIMEOUT');
    expect(Date.now() - started).toBeLessThan(2 * 300 + 500); // (retries + 1) x request_timeout_ms, plus slack
    expect(fixture.nodes['dc1-1']!.hits + fixture.nodes['dc1-2']!.hits).toBe(2);
  });

  it('answers 502 when every node refuses connections', async () => {
    const app = await setup();
    await Promise.all(Object.values(fixture.nodes).map((n) => n.stop()));
    const { res, text } = await app.get('/proxy/users/x');
    expect(res.status).toBe(502);
    expect(JSON.parse(text).code).toBe('UPSTREAM_UNREACHABLE');
  });

  it('never replays a POST that reached a node answering 500', async () => {
    const app = await setup();
    fixture.nodes['dc1-1']!.mode = 'fail';
    fixture.nodes['dc1-2']!.mode = 'fail';
    const res = await fetch(`${app.url}/proxy/users/orders`, {
      method: 'POST',
      body: '{"a":1}',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(500);
    expect(await res.text()).toMatch(/^boom from dc1-/);
    expect(fixture.nodes['dc1-1']!.hits + fixture.nodes['dc1-2']!.hits).toBe(1);
    expect(fixture.nodes['dc2-1']!.hits + fixture.nodes['dc2-2']!.hits).toBe(0);
  });

  it('moves a POST on to the next node when the connection is refused', async () => {
    const app = await setup();
    await fixture.nodes['dc1-1']!.stop();
    await fixture.nodes['dc1-2']!.stop();
    const res = await fetch(`${app.url}/proxy/users/orders`, {
      method: 'POST',
      body: 'hello',
      headers: { 'content-type': 'text/plain' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-dc')).toBe('dc2');
    expect(await res.text()).toBe('hello');
  });

  it('retries a GET answered 500 once on another node, then passes the 5xx through', async () => {
    const app = await setup();
    for (const node of Object.values(fixture.nodes)) node.mode = 'fail';
    const { res, text } = await app.get('/proxy/users/x');
    expect(res.status).toBe(500);
    expect(text).toMatch(/^boom from /);
    expect(Object.values(fixture.nodes).reduce((n, node) => n + node.hits, 0)).toBe(2); // retries: 1
  });

  it('serves a GET from the other local node when the first answers 500', async () => {
    const app = await setup();
    fixture.nodes['dc1-1']!.mode = 'fail';
    const answers = await getMany(app, 4);
    expect(answers.every((a) => a.res.status === 200 && a.res.headers.get('x-node') === 'dc1-2')).toBe(true);
  });

  it('cancels the attempt when the caller hangs up, without counting it against the node', async () => {
    const app = await setup('timeout_seconds: 5\nrequest_timeout_ms: 5000');
    for (const node of Object.values(fixture.nodes)) node.mode = 'hang';
    const caller = new AbortController();
    const pending = fetch(`${app.url}/proxy/users/slow`, { signal: caller.signal }).catch(() => 'aborted');
    const node = fixture.nodes['dc1-1']!;
    for (let i = 0; i < 100 && node.hits === 0; i++) await new Promise((r) => setTimeout(r, 10));
    caller.abort();
    expect(await pending).toBe('aborted');
    for (let i = 0; i < 100 && node.abandoned === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(node.abandoned).toBe(1); // well before the 5 s request timeout
    expect((await app.breaker.get('users/dc1-1'))?.failureCount).toBe(0);
    expect(Object.values(fixture.nodes).reduce((n, x) => n + x.hits, 0)).toBe(1); // no retry elsewhere
  });
});
