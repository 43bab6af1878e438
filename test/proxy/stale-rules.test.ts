import type http from 'node:http';
import { describe, expect, it } from 'vitest';
import { rawRequest, useProxyFixture, type ProxyApp } from './proxy-app.js';

/**
 * The stale fallback follows RFC 9111 (issue 15): the coalescing key (Host, path and query,
 * Vary'd fields), the same storability rules, and never a stale answer its node forbade.
 */
const fixture = useProxyFixture();

async function setup(
  answer: (req: http.IncomingMessage) => { headers?: http.OutgoingHttpHeaders; body?: string },
): Promise<ProxyApp> {
  const app = await fixture.start(
    ['dc1-1', 'dc2-1'],
    'request_timeout_ms: 500\nhealth_check: { enabled: false }\nfallback: { stale_seconds: 60 }',
  );
  for (const node of Object.values(fixture.nodes)) node.respond = answer;
  return app;
}

function openAll(app: ProxyApp) {
  for (const id of Object.keys(fixture.nodes))
    for (let i = 0; i < 3; i++) app.breaker.record(`users/${id}`, { success: false });
}

const get = (app: ProxyApp, headers: http.OutgoingHttpHeaders = {}) =>
  rawRequest(app.url, 'GET', '/proxy/users/page', headers);

describe('stale fallback rules', () => {
  it('keys on Host: a page kept for one host never reaches another', async () => {
    const app = await setup((req) => ({ body: `page for ${req.headers['x-forwarded-host']}` }));
    expect((await get(app, { host: 'evil.example' })).body).toBe('page for evil.example');
    openAll(app);
    const victim = await get(app, { host: 'shop.example' });
    expect(victim.status).toBe(503);
    expect(victim.body).not.toContain('evil.example');
    const same = await get(app, { host: 'evil.example' });
    expect([same.status, same.headers['x-fallback'], same.body]).toEqual([200, 'stale', 'page for evil.example']);
  });

  it('never serves a gzip body kept under Vary: Accept-Encoding to a client that did not accept gzip', async () => {
    const app = await setup((req) =>
      /gzip/.test(String(req.headers['accept-encoding']))
        ? { headers: { vary: 'Accept-Encoding', 'content-encoding': 'gzip' }, body: 'GZIP' }
        : { headers: { vary: 'Accept-Encoding' }, body: 'plain' },
    );
    await get(app, { 'accept-encoding': 'gzip' });
    openAll(app);
    const plain = await get(app, { 'accept-encoding': 'identity' });
    expect(plain.status).toBe(503);
    expect(plain.headers['content-encoding']).toBeUndefined();
    const gz = await get(app, { 'accept-encoding': 'gzip' });
    expect([gz.status, gz.headers['content-encoding'], gz.body]).toEqual([200, 'gzip', 'GZIP']);
  });

  it.each(['no-cache', 'must-revalidate', 'proxy-revalidate', 'stale-if-error=0', 'max-age=0, s-maxage=0'])(
    'never serves stale an answer marked Cache-Control: %s',
    async (cc) => {
      const app = await setup(() => ({ headers: { 'cache-control': cc }, body: 'do not reuse' }));
      await get(app);
      openAll(app);
      app.clock.advance(1_000);
      const res = await get(app);
      expect(res.status).toBe(503);
      expect(res.headers['x-fallback']).toBeUndefined();
    },
  );

  it('never keeps the answer to a request with an X-Api-Key for anyone', async () => {
    const app = await setup((req) => ({ body: `data of ${req.headers['x-api-key']}` }));
    await get(app, { 'x-api-key': 'alice-key' });
    openAll(app);
    expect((await get(app)).status).toBe(503);
    expect((await get(app, { 'x-api-key': 'alice-key' })).status).toBe(503);
  });

  it('still serves a plain answer stale, for the same Host and path', async () => {
    const app = await setup(() => ({ headers: { 'cache-control': 'max-age=5' }, body: 'shared page' }));
    await get(app, { host: 'shop.example' });
    openAll(app);
    app.clock.advance(20_000);
    const res = await get(app, { host: 'shop.example' });
    expect([res.status, res.headers['x-fallback'], res.headers.age, res.body]).toEqual([
      200,
      'stale',
      '20',
      'shared page',
    ]);
  });
});
