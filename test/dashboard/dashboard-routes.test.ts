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
    for (const [file, type] of [
      ['dashboard.js', 'text/javascript'],
      ['dashboard.css', 'text/css'],
    ]) {
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
    expect(state.circuits[1]).toMatchObject({
      state: 'open',
      last_transition: { id: 1, circuit: 'b', from: 'closed', to: 'open' },
    });
    expect(state.recent).toHaveLength(1);
    expect(state.upstreams).toEqual([]);
  });
});

describe('dashboard state in pages', () => {
  it('answers a page of circuits at a time, with next_after until the last page', async () => {
    const app = buildObservedApp();
    const outcomes = Array.from({ length: 1_200 }, (_, i) => ({ circuit: `c${i}`, success: true }));
    for (let i = 0; i < 1_200; i += 500)
      expect((await app.request('POST', '/outcomes', { outcomes: outcomes.slice(i, i + 500) })).status).toBe(200);
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/c1100/failure');
    const names: string[] = [];
    const sizes: number[] = [];
    let after: number | null = 0;
    let last: { circuits: { name: string; last_transition: unknown }[]; next_after: number | null } | undefined;
    while (after !== null) {
      const res = await app.request('GET', `/dashboard/api/state?limit=500&after=${after}`);
      expect(res.status).toBe(200);
      last = await res.json();
      sizes.push(last!.circuits.length);
      names.push(...last!.circuits.map((c) => c.name));
      after = last!.next_after;
    }
    expect(sizes).toEqual([500, 500, 200]);
    expect(names).toEqual(outcomes.map((o) => o.circuit));
    expect(last!.circuits.find((c) => c.name === 'c1100')!.last_transition).toMatchObject({
      circuit: 'c1100',
      to: 'open',
    });
  });

  it('pages 500 circuits by default and filters by state', async () => {
    const app = buildObservedApp();
    const outcomes = Array.from({ length: 600 }, (_, i) => ({ circuit: `c${i}`, success: true }));
    expect((await app.request('POST', '/outcomes', { outcomes: outcomes.slice(0, 500) })).status).toBe(200);
    expect((await app.request('POST', '/outcomes', { outcomes: outcomes.slice(500) })).status).toBe(200);
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/c599/failure');
    const first = await (await app.request('GET', '/dashboard/api/state')).json();
    expect([first.circuits.length, typeof first.next_after]).toEqual([500, 'number']);
    const open = await (await app.request('GET', '/dashboard/api/state?state=open')).json();
    expect([open.circuits.map((c: { name: string }) => c.name), open.next_after]).toEqual([['c599'], null]);
  });

  it('names a bad or unknown query parameter in a 400', async () => {
    const app = buildObservedApp();
    for (const [query, field] of [
      ['limit=0', 'limit'],
      ['limit=5000', 'limit'],
      ['after=x', 'after'],
      ['state=shut', 'state'],
      ['page=2', 'page'],
    ]) {
      const res = await app.request('GET', `/dashboard/api/state?${query}`);
      expect(res.status).toBe(400);
      expect((await res.json()).errors.map((e: { field: string }) => e.field)).toEqual([field]);
    }
  });
  it('searches names on the server (?q=, ignoring case), reading at most 5,000 circuits per answer and saying where to go on', async () => {
    const app = buildObservedApp();
    const insert = app.db.prepare(
      'INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES (?, 5, 30, 0, 0)',
    );
    app.db.transaction(() => {
      for (let i = 1; i <= 12_000; i++) insert.run(i === 3 || i === 11_000 ? `Pay/wanted-${i}` : `other/c${i}`);
    })();
    const get = async (query: string) =>
      (await (await app.request('GET', `/dashboard/api/state?${query}`)).json()) as {
        circuits: { name: string }[];
        next_after: number | null;
      };
    const first = await get('q=PAY%2FWANTED&limit=10');
    expect([first.circuits.map((c) => c.name), first.next_after]).toEqual([['Pay/wanted-3'], 5_000]);
    const second = await get('q=pay%2Fwanted&limit=10&after=5000');
    expect([second.circuits.map((c) => c.name), second.next_after]).toEqual([[], 10_000]);
    const third = await get('q=pay%2Fwanted&limit=10&after=10000');
    expect([third.circuits.map((c) => c.name), third.next_after]).toEqual([['Pay/wanted-11000'], null]);
    const full = await get('q=other&limit=2');
    expect([full.circuits.map((c) => c.name), full.next_after]).toEqual([['other/c1', 'other/c2'], 2]);
    expect((await app.request('GET', '/dashboard/api/state?q=')).status).toBe(400);
  });
});
