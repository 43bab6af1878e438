import { describe, expect, it } from 'vitest';
import { useProxyFixture, type ProxyApp } from './proxy-app.js';

const fixture = useProxyFixture();

function setup(extra: string) {
  return fixture.start(['dc1-1', 'dc2-1'], `request_timeout_ms: 500\n${extra}`);
}

function openAll(app: ProxyApp) {
  for (const id of Object.keys(fixture.nodes))
    for (let i = 0; i < 3; i++) app.breaker.record(`users/${id}`, { success: false });
}

describe('bulkhead', () => {
  it('answers 503 with Retry-After: 1 over max_concurrent, and frees the slot afterwards', async () => {
    const app = await setup('max_concurrent: 2');
    for (const n of Object.values(fixture.nodes)) n.mode = 'hang';
    const slow = [fetch(`${app.url}/proxy/users/a`), fetch(`${app.url}/proxy/users/b`)];
    await new Promise((resolve) => setTimeout(resolve, 100));
    const { res, text } = await app.get('/proxy/users/c');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(JSON.parse(text).code).toBe('BULKHEAD_FULL');
    await Promise.all(slow.map(async (p) => (await p).text()));
    for (const n of Object.values(fixture.nodes)) n.mode = 'ok';
    app.breaker.reset('users/dc1-1');
    expect((await app.get('/proxy/users/d')).res.status).toBe(200);
  });
});

describe('fallback', () => {
  it('serves the last good GET answer for the path when no node can serve', async () => {
    const app = await setup('fallback: { stale_seconds: 60 }');
    const fresh = await app.get('/proxy/users/list?page=1');
    openAll(app);
    app.clock.advance(20_000); // the circuits stay open for 30 s
    const { res, text } = await app.get('/proxy/users/list?page=1');
    expect(res.status).toBe(200);
    expect(text).toBe(fresh.text);
    expect(res.headers.get('x-fallback')).toBe('stale');
    expect(res.headers.get('x-degraded')).toBe('true');
    expect(res.headers.get('age')).toBe('20');
    expect((await app.get('/proxy/users/list?page=2')).res.status).toBe(503);
  });

  it('does not serve a stale answer older than stale_seconds', async () => {
    const app = await setup('fallback: { stale_seconds: 10 }');
    await app.get('/proxy/users/list');
    openAll(app);
    app.clock.advance(11_000);
    // the circuits opened at t0 for 30 s, so they are still open at t0 + 11 s
    expect((await app.get('/proxy/users/list')).res.status).toBe(503);
  });

  it('never keeps an answer to a request with credentials', async () => {
    const app = await setup('fallback: { stale_seconds: 60 }');
    await app.get('/proxy/users/me', { headers: { authorization: 'Bearer alice' } });
    openAll(app);
    expect((await app.get('/proxy/users/me')).res.status).toBe(503);
  });

  it('serves the static response when no node can serve', async () => {
    const app = await setup(
      'fallback: { static: { status: 200, headers: { Content-Type: application/json }, body: "{\\"items\\":[]}" } }',
    );
    openAll(app);
    const { res, text } = await app.get('/proxy/users/list');
    expect(res.status).toBe(200);
    expect(text).toBe('{"items":[]}');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('x-fallback')).toBe('static');
    expect(res.headers.get('x-degraded')).toBe('true');
  });

  it('serves the static response when every node times out', async () => {
    const app = await setup('fallback: { static: { body: "later" } }');
    for (const n of Object.values(fixture.nodes)) n.mode = 'hang';
    const { res, text } = await app.get('/proxy/users/list');
    expect(res.status).toBe(503);
    expect(text).toBe('later');
    expect(res.headers.get('x-fallback')).toBe('static');
  });
});
