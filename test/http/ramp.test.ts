import { describe, expect, it } from 'vitest';
import type { AppDeps } from '../../src/app.js';
import { useServedApp } from './served-app.js';

// Issue 29's shared slow start on the wire (docs/api.md "The shared slow start"): after a
// circuit closes from half-open, /allowed and /call admit a share growing from start_percent to
// 100 over ramp.seconds; a call above it gets 503 circuit-ramping with Retry-After: 1. The
// draws come from the injected random source, so the test decides them. Served as main.ts
// serves it: GET /allowed on a ramping circuit is answered by the raw fast path.

const serve = useServedApp();
// biome-ignore lint/suspicious/noExplicitAny: answers are read as loose JSON, as in the other HTTP suites
type Json = Record<string, any>;

/** A random source answering `draws.value` (the test sets it before each call). */
function scripted() {
  const draws = { value: 0.5 };
  return { draws, random: () => draws.value };
}

/** A circuit with ramp {seconds: 10} that opened at T0 and closed from half-open at T0 + 30 s. */
async function rampingApp(overrides: Partial<AppDeps> = {}) {
  const { draws, random } = scripted();
  const t = await serve({ random, ...overrides });
  const at = (path: string) => `${t.url}${path}`;
  const post = (path: string, body: unknown) =>
    fetch(at(path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await fetch(at('/circuits/svc'), {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ramp: { seconds: 10 } }),
  });
  for (let i = 0; i < 5; i++) await post('/circuits/svc/outcomes', { success: false });
  t.clock.advance(30_000);
  expect((await fetch(at('/circuits/svc/allowed'))).status).toBe(200); // the probe
  const closed = (await (await post('/circuits/svc/outcomes', { success: true })).json()) as Json;
  expect(closed).toMatchObject({
    state: 'closed',
    ramp_until: '2026-11-30T03:30:40.000Z',
    ramp_percent: 10,
    ramp: { seconds: 10, start_percent: 10 },
  });
  return { t, draws, at, post };
}

describe('a ramping circuit', () => {
  it('refuses /allowed above its share: 503 circuit-ramping, Retry-After: 1, ramp_percent and ramp_until', async () => {
    const { t, draws, at } = await rampingApp();
    t.clock.advance(5_000); // halfway: 55 %
    draws.value = 0.56;
    const refused = await fetch(at('/circuits/svc/allowed'));
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await refused.json()).toMatchObject({
      type: '/problems/circuit-ramping',
      code: 'CIRCUIT_RAMPING',
      circuit: 'svc',
      state: 'closed',
      ramp_percent: 55,
      ramp_until: '2026-11-30T03:30:40.000Z',
    });
    draws.value = 0.54;
    const admitted = await fetch(at('/circuits/svc/allowed'));
    expect(admitted.status).toBe(200);
    const body = (await admitted.json()) as Json;
    expect(Object.keys(body)).toEqual(['allowed', 'state', 'ramp_percent', 'circuit']);
    expect(body).toMatchObject({ allowed: true, ramp_percent: 55, circuit: { ramp_percent: 55 } });
  });

  it('refuses /call above its share too, and records nothing for it', async () => {
    const { t, draws, post } = await rampingApp();
    t.clock.advance(1_000); // 19 %
    draws.value = 0.2;
    const refused = await post('/circuits/svc/call', { success: false });
    expect(refused.status).toBe(503);
    expect(((await refused.json()) as Json).code).toBe('CIRCUIT_RAMPING');
    draws.value = 0.18;
    const called = (await (await post('/circuits/svc/call', { success: false })).json()) as Json;
    expect(called.circuit).toMatchObject({ failure_count: 1, ramp_percent: 19 });
  });

  it('admits every call once the ramp is over, with no ramp_percent on the answer', async () => {
    const { t, draws, at } = await rampingApp();
    t.clock.advance(10_000);
    draws.value = 0.999;
    const answer = await fetch(at('/circuits/svc/allowed'));
    expect(answer.status).toBe(200);
    const body = (await answer.json()) as Json;
    expect(Object.keys(body)).toEqual(['allowed', 'state', 'circuit']);
    expect(body.circuit).toMatchObject({ ramp_until: null, ramp_percent: 100 });
  });

  it('ramps after a circuit-wide cool-down ends', async () => {
    const { draws, random } = scripted();
    const t = await serve({ random });
    const at = (path: string) => `${t.url}${path}`;
    const send = (method: string, path: string, body: unknown) =>
      fetch(at(path), { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await send('PATCH', '/circuits/svc', { ramp: { seconds: 20, start_percent: 20 } });
    await send('POST', '/circuits/svc/outcomes', { kind: 'throttled', retry_after_seconds: 2 });
    expect((await fetch(at('/circuits/svc/allowed'))).status).toBe(503);
    t.clock.advance(2_000);
    draws.value = 0.25;
    const refused = await fetch(at('/circuits/svc/allowed'));
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ code: 'CIRCUIT_RAMPING', ramp_percent: 20 });
    const { events } = (await (await fetch(at('/circuits/svc/events'))).json()) as Json;
    expect(events[0]).toMatchObject({
      reason: 'cool_down_ended',
      scope: 'circuit',
      ramp_until: '2026-11-30T03:30:22.000Z',
    });
  });
});
