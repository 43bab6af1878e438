import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

// The shadow policy over HTTP (issue 31; docs/api.md "Shadow policy"): run on both stores.

type App = ReturnType<typeof buildApp>;
const json = async (res: Response) => (await res.json()) as any;
const get = async (t: App, name = 'svc') => json(await t.request('GET', `/circuits/${name}`));
const outcome = (t: App, success: boolean, name = 'svc') =>
  t.request('POST', `/circuits/${name}/outcomes`, { success });
const patch = (t: App, body: unknown, name = 'svc') =>
  t.request('PATCH', `/circuits/${name}`, JSON.stringify(body), { 'content-type': 'application/merge-patch+json' });
const allowed = async (t: App, name = 'svc') => json(await t.request('GET', `/circuits/${name}/allowed`));

/** A circuit with the live threshold 5 and a stricter shadow (2), after `failures` failures. */
async function strictShadow(failures: number): Promise<App> {
  const t = buildApp();
  expect((await patch(t, { failure_threshold: 5, shadow: { failure_threshold: 2 } })).status).toBe(201);
  for (let i = 0; i < failures; i++) expect((await outcome(t, false)).status).toBe(200);
  return t;
}

describe('the shadow policy', () => {
  it('shows the shadow policy, merged over the live one, with its state and counts', async () => {
    const t = await strictShadow(1);
    const c = await get(t);
    expect(c.failure_threshold).toBe(5);
    expect(c.shadow).toMatchObject({
      policy: { failure_threshold: 2, timeout_seconds: 30, half_open_max_calls: 1, forced_state: null },
      state: 'closed',
      open_until: null,
      since: '2026-11-30T03:30:00.000Z',
      counts: { outcomes: 1, refused: 0, openings: 0 },
      window_stats: null,
    });
  });

  it('opens in shadow while the live circuit stays closed and admits every call', async () => {
    const t = await strictShadow(2);
    const c = await get(t);
    expect(c.state).toBe('closed');
    expect(c.shadow).toMatchObject({ state: 'open', counts: { outcomes: 2, openings: 1 } });
    expect(c.shadow.open_until).toBe('2026-11-30T03:30:30.000Z');
    const answer = await allowed(t);
    expect(answer).toMatchObject({ allowed: true, state: 'closed', shadow_would_refuse: true });
    // Calls go on; their outcomes arrive while the shadow refuses: counted, not fed to it.
    for (let i = 0; i < 3; i++) expect((await outcome(t, true)).status).toBe(200);
    expect((await get(t)).shadow).toMatchObject({ state: 'open', counts: { outcomes: 2, refused: 3, openings: 1 } });
  });

  it('lists its transitions among the events, marked shadow, apart from the live ones', async () => {
    const t = await strictShadow(2);
    const events = await json(await t.request('GET', '/circuits/svc/events'));
    expect(events.events).toEqual([
      { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: '2026-11-30T03:30:00.000Z', shadow: true },
    ]);
  });

  it('half-opens in shadow after its open time, and /allowed stops saying it would refuse', async () => {
    const t = await strictShadow(2);
    t.clock.advance(30_000);
    const answer = await allowed(t);
    expect(answer).not.toHaveProperty('shadow_would_refuse');
    expect((await get(t)).shadow.state).toBe('half_open');
  });

  it('says nothing of a shadow on a circuit without one', async () => {
    const t = buildApp();
    await outcome(t, false);
    expect(await get(t)).not.toHaveProperty('shadow');
    expect(await allowed(t)).not.toHaveProperty('shadow_would_refuse');
  });

  it('promotes the shadow in one PATCH: the next outcomes follow its policy at once', async () => {
    const t = await strictShadow(1);
    const res = await patch(t, { shadow: 'promote' });
    expect(res.status).toBe(200);
    const c = await json(res);
    expect(c.failure_threshold).toBe(2);
    expect(c).not.toHaveProperty('shadow');
    await outcome(t, false); // the live count (1) is kept: the second failure opens under the promoted policy
    expect((await get(t)).state).toBe('open');
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(503);
  });

  it('forgets the shadow on null', async () => {
    const t = await strictShadow(2);
    const res = await patch(t, { shadow: null });
    expect(res.status).toBe(200);
    expect(await json(res)).not.toHaveProperty('shadow');
    expect(await get(t)).not.toHaveProperty('shadow');
    expect(await allowed(t)).not.toHaveProperty('shadow_would_refuse');
    await outcome(t, false);
    expect(await get(t)).not.toHaveProperty('shadow');
  });

  it('refuses bad shadow input with a problem naming the field, and changes nothing', async () => {
    const t = await strictShadow(1);
    const before = await get(t);
    const bad: [unknown, string][] = [
      [{ shadow: { failure_threshold: 0 } }, 'shadow.failure_threshold'],
      [{ shadow: { nonsense: 1 } }, 'shadow.nonsense'],
      [{ shadow: { forced_state: 'open' } }, 'shadow.forced_state'],
      [{ shadow: 'promoted' }, 'shadow'],
      [{ shadow: [1] }, 'shadow'],
      [{ shadow: 'promote', failure_threshold: 3 }, 'shadow'],
      [{ failure_threshold: 3, shadow: { window: { type: 'count' } } }, 'shadow.window.size'],
    ];
    for (const [body, field] of bad) {
      const res = await patch(t, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      const problem = await json(res);
      expect(problem.code).toBe('VALIDATION_FAILED');
      expect(problem.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect(await get(t)).toEqual(before);
  });

  it('refuses to promote when there is no shadow, and changes nothing', async () => {
    const t = buildApp();
    await outcome(t, false);
    const before = await get(t);
    const res = await patch(t, { shadow: 'promote' });
    expect(res.status).toBe(422);
    expect((await json(res)).errors).toEqual([{ field: 'shadow', message: 'there is no shadow policy to promote' }]);
    expect(await get(t)).toEqual(before);
  });

  it('resets the shadow with the live circuit', async () => {
    const t = await strictShadow(2);
    expect((await t.request('POST', '/circuits/svc/reset')).status).toBe(200);
    expect((await get(t)).shadow).toMatchObject({ state: 'closed', counts: { outcomes: 2, openings: 1 } });
  });

  it('keeps the shadow and its counts across a live policy change', async () => {
    const t = await strictShadow(1);
    expect((await patch(t, { failure_threshold: 7 })).status).toBe(200);
    const c = await get(t);
    expect(c.failure_threshold).toBe(7);
    expect(c.shadow).toMatchObject({ policy: { failure_threshold: 2 }, counts: { outcomes: 1 } });
  });

  it('advances the shadow on every outcome route: batches, circuitlog failures and /call', async () => {
    const t = await strictShadow(0);
    await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'svc', success: false }] });
    await t.request('POST', '/circuits/svc/call', { success: false });
    const c = await get(t);
    expect(c.state).toBe('closed');
    expect(c.shadow).toMatchObject({ state: 'open', counts: { outcomes: 2, openings: 1 } });
  });
});
