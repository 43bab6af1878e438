// Issue 15: open -> half-open is stamped at open_until and published without traffic.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DueTransitions } from '../../src/service/due-transitions.js';
import { buildApp, silentLogger } from '../helper.js';

afterEach(() => {
  vi.useRealTimers();
});

async function tripped(t: ReturnType<typeof buildApp>, name = 'svc') {
  for (let i = 0; i < 5; i++) await t.request('POST', `/circuits/${name}/outcomes`, { success: false });
  expect(await (await t.request('GET', `/circuits/${name}`)).json()).toMatchObject({
    state: 'open',
    open_until: '2026-11-30T03:30:30.000Z',
  });
}

describe('due open -> half-open transitions', () => {
  it('are written by publishDue, stamped at open_until however late it runs', async () => {
    const t = buildApp();
    await tripped(t);
    t.clock.advance(29_999);
    expect(await t.breaker.publishDue()).toBe(0);
    t.clock.advance(700);
    expect(await t.breaker.publishDue()).toBe(1);
    const { events } = await (await t.request('GET', '/circuits/svc/events')).json();
    expect(events[0]).toEqual({
      from: 'open',
      to: 'half_open',
      reason: 'open_timeout_elapsed',
      at: '2026-11-30T03:30:30.000Z',
    });
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({
      state: 'half_open',
      half_open_at: '2026-11-30T03:30:30.000Z',
    });
    expect(await t.breaker.publishDue()).toBe(0); // nothing left
  });

  it('stamps the lazy transition of a read at open_until too', async () => {
    const t = buildApp();
    await tripped(t);
    t.clock.advance(45_000);
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({
      state: 'half_open',
      half_open_at: '2026-11-30T03:30:30.000Z',
    });
    const { events } = await (await t.request('GET', '/circuits/svc/events')).json();
    expect(events[0]).toMatchObject({ to: 'half_open', at: '2026-11-30T03:30:30.000Z' });
  });

  it('publishes only the due ones, earliest first, at most a batch per round', async () => {
    const t = buildApp();
    await tripped(t, 'a');
    t.clock.advance(1_000);
    await tripped(t, 'b').catch(() => undefined); // opened 1 s later
    t.clock.advance(29_500); // a is due, b is not
    expect(await t.breaker.publishDue(10)).toBe(1);
    expect((await (await t.request('GET', '/circuits/b/events')).json()).events[0]).toMatchObject({ to: 'open' });
    t.clock.advance(1_000);
    expect(await t.breaker.publishDue(10)).toBe(1);
  });

  it('runs on a timer: a due transition is published within a second with no request at all', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const t = buildApp();
    await tripped(t);
    const job = new DueTransitions(t.breaker, silentLogger);
    job.start();
    t.clock.advance(30_000);
    await vi.advanceTimersByTimeAsync(500);
    // On Redis the round's writes take a few real milliseconds.
    await vi.waitFor(async () =>
      expect(await t.store.find('svc')).toMatchObject({
        state: 'half_open',
        halfOpenAt: Date.parse('2026-11-30T03:30:30.000Z'),
      }),
    );
    job.stop();
  });

  it('keeps running when the store fails a round', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const t = buildApp();
    await tripped(t);
    const spy = vi.spyOn(t.store, 'dueOpen').mockImplementationOnce(() => {
      throw new Error('store down');
    });
    const warn = vi.spyOn(silentLogger, 'warn');
    const job = new DueTransitions(t.breaker, silentLogger);
    job.start();
    t.clock.advance(30_000);
    await vi.advanceTimersByTimeAsync(500);
    await vi.waitFor(() => expect(warn).toHaveBeenCalledTimes(1));
    await vi.advanceTimersByTimeAsync(500);
    await vi.waitFor(async () => expect(await t.store.find('svc')).toMatchObject({ state: 'half_open' }));
    job.stop();
    expect(spy).toHaveBeenCalledTimes(2);
    expect(warn).toHaveBeenCalledTimes(1);
  });
});
