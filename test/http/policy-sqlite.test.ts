import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

// Checks that read or write the SQLite tables directly; the store-agnostic behaviour of the
// same routes is in policy.test.ts, which runs on both stores.
type App = ReturnType<typeof buildApp>;
const json = async (res: Response) => (await res.json()) as any;
const fail = (t: App, name: string) => t.request('POST', `/circuits/${name}/outcomes`, { success: false });

describe('DELETE /circuits/:name on SQLite', () => {
  it('removes the transitions rows with the circuit', async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await fail(t, 'svc');
    expect(t.db.prepare('SELECT count(*) FROM transitions').pluck().get()).toBe(1);
    expect((await t.request('DELETE', '/circuits/svc')).status).toBe(204);
    expect(t.db.prepare('SELECT count(*) FROM transitions').pluck().get()).toBe(0);
  });
});

describe('listing on SQLite (issue 7)', () => {
  it('GET /circuits?limit=1 writes the lazy transition of the page only; the state filter judges by now', async () => {
    const t = buildApp();
    const now = t.clock.now();
    const insert = t.db.prepare(
      `INSERT INTO circuits (name, state, failure_count, failure_threshold, timeout_seconds, half_open_max_calls, open_until, created_at, updated_at)
       VALUES (?, 'open', 5, 5, 30, 1, ?, ?, ?)`,
    );
    t.db.transaction(() => {
      for (let i = 0; i < 20_000; i++) insert.run(`c${i}`, now - 1, now - 31_000, now - 31_000);
    })();
    const page = await json(await t.request('GET', '/circuits?limit=1'));
    expect(page.circuits.map((c: { name: string; state: string }) => [c.name, c.state])).toEqual([['c0', 'half_open']]);
    expect(t.db.prepare('SELECT count(*) FROM transitions').pluck().get()).toBe(1);
    const halfOpen = await json(await t.request('GET', '/circuits?state=half_open&limit=2'));
    expect(halfOpen.circuits.map((c: { name: string }) => c.name)).toEqual(['c0', 'c1']);
    expect((await json(await t.request('GET', '/circuits?state=open&limit=5'))).circuits).toEqual([]);
    expect(t.db.prepare('SELECT count(*) FROM transitions').pluck().get()).toBe(2);
  });
});
