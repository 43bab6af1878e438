import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

async function openCircuit(t: ReturnType<typeof buildApp>, name: string, extra: Record<string, unknown> = {}) {
  for (let i = 0; i < 3; i++)
    await t.request('POST', `/circuits/${name}/call`, { success: false, threshold: 3, ...extra });
}

describe('GET /circuits/:name/allowed', () => {
  it('allows an unknown circuit without creating it', async () => {
    const t = buildApp();
    const res = await t.request('GET', '/circuits/fresh/allowed');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ allowed: true, state: 'closed', circuit: null });
    expect((await t.request('GET', '/circuits/fresh')).status).toBe(404);
  });

  it('answers 503 problem+json with Retry-After, circuit and open_until while open', async () => {
    const t = buildApp();
    await openCircuit(t, 'svc');
    t.clock.advance(10_500);
    const res = await t.request('GET', '/circuits/svc/allowed');
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(res.headers.get('retry-after')).toBe('20');
    expect(await res.json()).toEqual({
      type: '/problems/circuit-open',
      title: 'Circuit is open',
      status: 503,
      detail: expect.stringContaining("'svc' is open"),
      instance: '/circuits/svc/allowed',
      request_id: res.headers.get('x-request-id'),
      code: 'CIRCUIT_OPEN',
      circuit: 'svc',
      state: 'open',
      open_until: '2026-11-30T03:30:30.000Z',
    });
  });

  it('never sends Retry-After below 1', async () => {
    const t = buildApp();
    await openCircuit(t, 'svc');
    t.clock.advance(29_999);
    expect((await t.request('GET', '/circuits/svc/allowed')).headers.get('retry-after')).toBe('1');
  });

  it('admits one probe in half-open, then refuses until the probe reports', async () => {
    const t = buildApp();
    await openCircuit(t, 'svc');
    t.clock.advance(30_000);
    const first = await t.request('GET', '/circuits/svc/allowed');
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ allowed: true, state: 'half_open', circuit: { probes_in_flight: 1 } });
    const second = await t.request('GET', '/circuits/svc/allowed');
    expect(second.status).toBe(503);
    expect(await second.json()).toMatchObject({ state: 'half_open' });
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
  });

  it('frees the probe slot after the lease expires', async () => {
    const t = buildApp({ policy: { probeLeaseMs: 10_000 } });
    await openCircuit(t, 'svc');
    t.clock.advance(30_000);
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
    t.clock.advance(9_999);
    const refused = await t.request('GET', '/circuits/svc/allowed');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    t.clock.advance(1);
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
  });

  it('admits half_open_max_calls probes when configured higher', async () => {
    const t = buildApp({ circuitDefaults: { failureThreshold: 3, timeoutSeconds: 30, halfOpenMaxCalls: 3 } });
    for (let i = 0; i < 3; i++) await t.request('POST', '/circuits/svc/outcomes', { success: false });
    t.clock.advance(30_000);
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await t.request('GET', '/circuits/svc/allowed')).status);
    expect(statuses).toEqual([200, 200, 200, 503, 503]);
  });
});

describe('POST /circuits/:name/outcomes', () => {
  it('records failures and opens at the default threshold', async () => {
    const t = buildApp();
    let body: unknown;
    for (let i = 0; i < 5; i++)
      body = await (await t.request('POST', '/circuits/svc/outcomes', { success: false, duration_ms: 12.5 })).json();
    expect(body).toMatchObject({ state: 'open', failure_count: 5, failure_threshold: 5 });
  });

  it('rejects the string "true" with 422 and records nothing', async () => {
    const t = buildApp();
    await t.request('POST', '/circuits/svc/outcomes', { success: false });
    const res = await t.request('POST', '/circuits/svc/outcomes', { success: 'true' });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ field: 'success' }] });
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({ failure_count: 1 });
  });

  it('names every bad field', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/circuits/svc/outcomes', { duration_ms: -1 });
    const fields = (await res.json()).errors.map((e: { field: string }) => e.field).sort();
    expect(fields).toEqual(['duration_ms', 'success']);
  });
});

describe('listing and events', () => {
  it('lists circuits filtered by state, in pages', async () => {
    const t = buildApp();
    for (const name of ['a', 'b', 'c']) await t.request('POST', `/circuits/${name}/success`);
    await openCircuit(t, 'd');
    const open = await (await t.request('GET', '/circuits?state=open')).json();
    expect(open.circuits.map((c: { name: string }) => c.name)).toEqual(['d']);
    const page1 = await (await t.request('GET', '/circuits?limit=2')).json();
    expect(page1.circuits.map((c: { name: string }) => c.name)).toEqual(['a', 'b']);
    const page2 = await (await t.request('GET', `/circuits?limit=2&cursor=${page1.next_cursor}`)).json();
    expect(page2.circuits.map((c: { name: string }) => c.name)).toEqual(['c', 'd']);
  });

  it('lists an expired open circuit as half_open', async () => {
    const t = buildApp();
    await openCircuit(t, 'd');
    t.clock.advance(30_000);
    const half = await (await t.request('GET', '/circuits?state=half_open')).json();
    expect(half.circuits.map((c: { name: string }) => c.name)).toEqual(['d']);
  });

  it('returns transitions newest first', async () => {
    const t = buildApp();
    await openCircuit(t, 'svc');
    t.clock.advance(30_000);
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    const { events } = await (await t.request('GET', '/circuits/svc/events')).json();
    expect(events.map((e: { from: string; to: string; reason: string }) => `${e.from}>${e.to}:${e.reason}`)).toEqual([
      'half_open>closed:probe_succeeded',
      'open>half_open:open_timeout_elapsed',
      'closed>open:failure_threshold_reached',
    ]);
    expect(events[0].at).toBe('2026-11-30T03:30:30.000Z');
    expect((await t.request('GET', '/circuits/none/events')).status).toBe(404);
  });
});

describe('circuit names', () => {
  it('accepts names with / sent as %2F', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/circuits/payment-gateway%2Fcharge/failure');
    expect(await res.json()).toMatchObject({ name: 'payment-gateway/charge' });
    expect((await t.request('GET', '/circuits/payment-gateway%2Fcharge')).status).toBe(200);
  });

  it.each([
    ['a%20b', 'space'],
    ['a%2F%2Fb', 'empty segment'],
    ['%2Fa', 'leading slash'],
    ['a%2F..%2Fb', 'dot-dot segment'],
    ['x'.repeat(201), 'too long'],
    ['%C3%A9', 'non-ASCII'],
  ])('rejects %s (%s) with 400 and creates nothing', async (name) => {
    const t = buildApp();
    const res = await t.request('POST', `/circuits/${name}/failure`);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'INVALID_NAME' });
    expect((await (await t.request('GET', '/circuits')).json()).circuits).toEqual([]);
  });
});
