import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

// Issue 29's cool-downs on the wire (docs/api.md "Cool-downs"): a throttled outcome refuses
// /allowed and /call with 503 dependency-throttled until cool_until, in the circuit's scope or
// only the throttled caller's, then ends by itself (an event, no state change).

type App = ReturnType<typeof buildApp>;
// biome-ignore lint/suspicious/noExplicitAny: answers are read as loose JSON, as in the other HTTP suites
const json = async (r: Response) => (await r.json()) as Record<string, any>;
const get = async (t: App, name: string) => json(await t.request('GET', `/circuits/${name}`));
const events = async (t: App, name: string) => (await json(await t.request('GET', `/circuits/${name}/events`))).events;
const throttled = (t: App, body: Record<string, unknown> = {}) =>
  t.request('POST', '/circuits/svc/outcomes', { kind: 'throttled', ...body });

describe('a circuit-wide cool-down', () => {
  it('refuses /allowed and /call with 503 dependency-throttled, Retry-After the seconds left, cool_until', async () => {
    const t = buildApp();
    await t.request('POST', '/circuits/svc/outcomes', { success: false });
    expect((await throttled(t, { retry_after_seconds: 3 })).status).toBe(200);
    t.clock.advance(1_200);
    const refused = await t.request('GET', '/circuits/svc/allowed');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('2'); // 1.8 s left, rounded up
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await json(refused)).toMatchObject({
      type: '/problems/dependency-throttled',
      code: 'DEPENDENCY_THROTTLED',
      circuit: 'svc',
      state: 'closed',
      scope: 'circuit',
      cool_until: '2026-11-30T03:30:03.000Z',
    });
    const call = await t.request('POST', '/circuits/svc/call', { success: true });
    expect(call.status).toBe(503);
    expect((await json(call)).code).toBe('DEPENDENCY_THROTTLED');
    expect(await get(t, 'svc')).toMatchObject({
      state: 'closed',
      failure_count: 1,
      cool_until: '2026-11-30T03:30:03.000Z',
      cooling_callers: [],
    });
    expect((await events(t, 'svc'))[0]).toEqual({
      from: 'closed',
      to: 'closed',
      reason: 'cool_down',
      at: '2026-11-30T03:30:00.000Z',
      scope: 'circuit',
      until: '2026-11-30T03:30:03.000Z',
      retry_after_seconds: 3,
    });
  });

  it('ends by itself at cool_until: allowed again, cool_down_ended stamped at its end', async () => {
    const t = buildApp();
    await throttled(t, { retry_after_seconds: 3 });
    t.clock.advance(3_500);
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
    expect((await get(t, 'svc')).cool_until).toBeNull();
    expect((await events(t, 'svc'))[0]).toEqual({
      from: 'closed',
      to: 'closed',
      reason: 'cool_down_ended',
      at: '2026-11-30T03:30:03.000Z',
      scope: 'circuit',
    });
  });

  it('is extended only by a throttled outcome asking for longer, and capped at max_retry_after_seconds', async () => {
    const t = buildApp();
    await t.request('PATCH', '/circuits/svc', { max_retry_after_seconds: 60 });
    await throttled(t, { retry_after_seconds: 10 });
    await throttled(t, { retry_after_seconds: 5 });
    expect((await get(t, 'svc')).cool_until).toBe('2026-11-30T03:30:10.000Z');
    await throttled(t, { retry_after_seconds: 3_600 });
    expect((await get(t, 'svc')).cool_until).toBe('2026-11-30T03:31:00.000Z');
    expect((await events(t, 'svc')).map((e: { reason: string }) => e.reason)).toEqual(['cool_down', 'cool_down']);
  });

  it("lasts the circuit's timeout_seconds when the dependency named no Retry-After", async () => {
    const t = buildApp();
    await throttled(t);
    expect((await get(t, 'svc')).cool_until).toBe('2026-11-30T03:30:30.000Z');
  });
});

describe('a caller-scope cool-down', () => {
  it('refuses only the throttled caller; the others and anonymous calls go ahead', async () => {
    const t = buildApp();
    await t.request('PATCH', '/circuits/svc', { throttle_scope: 'caller' });
    await throttled(t, { retry_after_seconds: 5, caller: 'web-1' });
    const refused = await t.request('GET', '/circuits/svc/allowed?caller=web-1');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(await json(refused)).toMatchObject({ code: 'DEPENDENCY_THROTTLED', scope: 'caller', caller: 'web-1' });
    expect((await t.request('GET', '/circuits/svc/allowed?caller=web-2')).status).toBe(200);
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
    expect((await t.request('POST', '/circuits/svc/call?caller=web-1', {})).status).toBe(503);
    expect(await get(t, 'svc')).toMatchObject({
      throttle_scope: 'caller',
      cool_until: null,
      cooling_callers: [{ caller: 'web-1', cool_until: '2026-11-30T03:30:05.000Z' }],
    });
    expect((await events(t, 'svc'))[0]).toMatchObject({ reason: 'cool_down', scope: 'caller', callers: ['web-1'] });
    t.clock.advance(5_000);
    expect((await t.request('GET', '/circuits/svc/allowed?caller=web-1')).status).toBe(200);
    expect((await events(t, 'svc'))[0]).toMatchObject({
      reason: 'cool_down_ended',
      scope: 'caller',
      callers: ['web-1'],
    });
  });
});

describe('the end of a cool-down without traffic', () => {
  it('is written by the due-transition round (publishDue), stamped at cool_until, in both scopes', async () => {
    const t = buildApp();
    await throttled(t, { retry_after_seconds: 2 });
    await t.request('PATCH', '/circuits/other', { throttle_scope: 'caller' });
    await t.request('POST', '/circuits/other/outcomes', { kind: 'throttled', retry_after_seconds: 4, caller: 'web-1' });
    t.clock.advance(1_999);
    expect(await t.breaker.publishDue()).toBe(0);
    t.clock.advance(1);
    expect(await t.breaker.publishDue()).toBe(1);
    expect((await events(t, 'svc'))[0]).toMatchObject({ reason: 'cool_down_ended', at: '2026-11-30T03:30:02.000Z' });
    t.clock.advance(2_500);
    expect(await t.breaker.publishDue()).toBe(1);
    expect((await events(t, 'other'))[0]).toMatchObject({
      reason: 'cool_down_ended',
      scope: 'caller',
      callers: ['web-1'],
      at: '2026-11-30T03:30:04.000Z',
    });
    expect(await t.breaker.publishDue()).toBe(0); // nothing left
  });
});
