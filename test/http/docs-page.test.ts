import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

describe('Swagger UI at /docs', () => {
  it('loads every asset from the service itself, with a pinned version', async () => {
    const t = buildApp();
    const res = await t.request('GET', '/docs');
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain("url: '/openapi.json'");
    const assets = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toHaveLength(2);
    for (const asset of assets) {
      expect(asset).toMatch(/^\/docs\/swagger-ui-dist@\d+\.\d+\.\d+\/swagger-ui(-bundle\.js|\.css)$/);
      const file = await t.request('GET', asset);
      expect(file.status, asset).toBe(200);
      expect(file.headers.get('content-type')).toMatch(asset.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
      expect((await file.arrayBuffer()).byteLength).toBeGreaterThan(10_000);
    }
    expect(html).not.toMatch(/https?:\/\//);
  });

  it('serves nothing else from the package', async () => {
    const t = buildApp();
    const html = await (await t.request('GET', '/docs')).text();
    const base = /\/docs\/swagger-ui-dist@[^/]+/.exec(html)![0];
    expect((await t.request('GET', `${base}/package.json`)).status).toBe(404);
    expect((await t.request('GET', '/docs/swagger-ui-dist@0.0.1/swagger-ui.css')).status).toBe(404);
  });
});
