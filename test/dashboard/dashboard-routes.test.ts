import { describe, expect, it } from 'vitest';
import { buildObservedApp } from '../observe/observe-app.js';

const TOKEN = 'dashboard-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };

describe('dashboard routes', () => {
  it('redirects / to /dashboard', async () => {
    const res = await buildObservedApp().request('GET', '/');
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe('/dashboard');
  });

  it('serves the page and its assets from the repository, with no external URL', async () => {
    const app = buildObservedApp();
    const page = await app.request('GET', '/dashboard');
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('<script type="module" src="/dashboard/assets/dashboard.js">');
    for (const [file, type] of [['dashboard.js', 'text/javascript'], ['dashboard.css', 'text/css']]) {
      const res = await app.request('GET', `/dashboard/assets/${file}`);
      expect([res.status, res.headers.get('content-type')?.split(';')[0]]).toEqual([200, type]);
      expect(await res.text()).not.toMatch(/['"`(]https?:\/\//); // no URL in a string or url()
    }
    expect(html).not.toMatch(/(src|href)="https?:/);
    expect((await app.request('GET', '/dashboard/assets/other.js')).status).toBe(404);
  });

  it('serves the page without the token but its data only with it', async () => {
    const app = buildObservedApp({ deps: { token: TOKEN } });
    const page = await app.request('GET', '/dashboard');
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('data-token-required="true"');
    expect((await app.request('GET', '/dashboard/assets/dashboard.js')).status).toBe(200);
    expect((await app.request('GET', '/dashboard/api/state')).status).toBe(401);
    expect((await app.request('GET', '/dashboard/api/state', undefined, auth)).status).toBe(200);
  });

  it('gives the page every circuit with its last transition, the recent ones and where the stream resumes', async () => {
    const app = buildObservedApp();
    await app.request('POST', '/circuits/a/success');
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/b/failure');
    const state = await (await app.request('GET', '/dashboard/api/state')).json();
    expect(state.last_event_id).toBe(1);
    expect(state.circuits.map((c: { name: string }) => c.name)).toEqual(['a', 'b']);
    expect(state.circuits[0].last_transition).toBeNull();
    expect(state.circuits[1]).toMatchObject({ state: 'open', last_transition: { id: 1, circuit: 'b', from: 'closed', to: 'open' } });
    expect(state.recent).toHaveLength(1);
    expect(state.upstreams).toEqual([]);
  });
});
