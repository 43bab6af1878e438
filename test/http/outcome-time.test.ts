// Issue 15: outcomes carry their time (`at`); a stale one changes nothing.
import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

const iso = (ms: number) => new Date(ms).toISOString();

async function openThenHalfOpen(t: ReturnType<typeof buildApp>) {
  for (let i = 0; i < 5; i++) await t.request('POST', '/circuits/dep/outcomes', { success: false });
  t.clock.advance(40_000); // past the 30 s open time: the server applies the half-open now
  expect(await (await t.request('GET', '/circuits/dep')).json()).toMatchObject({ state: 'half_open' });
}

describe('outcome time (at)', () => {
  it('applies a failure that ended before the last state change as a late outcome: no re-open, no count', async () => {
    const t = buildApp();
    await openThenHalfOpen(t);
    const before = await (await t.request('GET', '/circuits/dep')).json();
    const res = await t.request('POST', '/circuits/dep/outcomes', { success: false, at: iso(t.clock.now() - 5_000) });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ state: 'half_open', failure_count: before.failure_count });
    expect(
      (await (await t.request('GET', '/circuits/dep/events')).json()).events.map((e: { to: string }) => e.to),
    ).toEqual(['half_open', 'open']);
  });

  it('judges a failure that ended after the change as ever: a probe failure re-opens', async () => {
    const t = buildApp();
    await openThenHalfOpen(t);
    t.clock.advance(100);
    const res = await t.request('POST', '/circuits/dep/outcomes', { success: false, at: iso(t.clock.now() - 50) });
    expect(await res.json()).toMatchObject({ state: 'open' });
  });

  it('allows 1 s of clock difference before the change: a probe from a host whose clock is behind still counts', async () => {
    const t = buildApp();
    await openThenHalfOpen(t);
    const res = await t.request('POST', '/circuits/dep/outcomes', { success: true, at: iso(t.clock.now() - 900) });
    expect(await res.json()).toMatchObject({ state: 'closed' });
  });

  it('applies stale outcomes in a batch as late ones, and judges the fresh ones after them', async () => {
    const t = buildApp();
    await openThenHalfOpen(t);
    const old = iso(t.clock.now() - 10_000);
    const res = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'dep', success: false, at: old },
        { circuit: 'dep', success: false, at: old },
        { circuit: 'dep', success: true, at: iso(t.clock.now()) },
      ],
    });
    expect(res.status).toBe(200);
    expect((await res.json()).results.map((r: { state: string }) => r.state)).toEqual([
      'half_open',
      'half_open',
      'closed',
    ]);
  });

  it('leaves out of a time window an outcome older than the window', async () => {
    const t = buildApp();
    await t.request('PATCH', '/circuits/win', { window: { type: 'time', size: 10, minimum_calls: 1 } });
    await t.request('POST', '/circuits/win/outcomes', { success: false, at: iso(t.clock.now() - 11_000) });
    expect(await (await t.request('GET', '/circuits/win')).json()).toMatchObject({
      state: 'closed',
      window_stats: { calls: 0 },
    });
    await t.request('POST', '/circuits/win/outcomes', { success: false, at: iso(t.clock.now() - 5_000) });
    expect(await (await t.request('GET', '/circuits/win')).json()).toMatchObject({ state: 'open' });
  });

  it('takes an at up to 60 s ahead, and rejects one further ahead with a 422 naming it', async () => {
    const t = buildApp();
    expect(
      (await t.request('POST', '/circuits/dep/outcomes', { success: false, at: iso(t.clock.now() + 60_000) })).status,
    ).toBe(200);
    const res = await t.request('POST', '/circuits/dep/outcomes', { success: false, at: iso(t.clock.now() + 60_001) });
    expect(res.status).toBe(422);
    expect((await res.json()).errors.map((e: { field: string }) => e.field)).toEqual(['at']);
    expect(await (await t.request('GET', '/circuits/dep')).json()).toMatchObject({ failure_count: 1 });
  });

  it('rejects a batch with one item too far ahead, naming the item, recording nothing', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'a', success: false, at: iso(t.clock.now()) },
        { circuit: 'a', success: false, at: iso(t.clock.now() + 3_600_000) },
      ],
    });
    expect(res.status).toBe(422);
    expect((await res.json()).errors.map((e: { field: string }) => e.field)).toEqual(['outcomes.1.at']);
    expect((await t.request('GET', '/circuits/a')).status).toBe(404);
  });

  it('takes an RFC 3339 offset and rejects what is not a date-time', async () => {
    const t = buildApp();
    expect(
      (await t.request('POST', '/circuits/dep/outcomes', { success: true, at: '2026-11-30T12:29:59.000+09:00' }))
        .status,
    ).toBe(200);
    const res = await t.request('POST', '/circuits/dep/outcomes', { success: true, at: '2026-11-30 03:30:00' });
    expect(res.status).toBe(422);
    expect((await res.json()).errors.map((e: { field: string }) => e.field)).toEqual(['at']);
  });
});
