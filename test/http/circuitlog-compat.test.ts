import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

/** The 15 scenarios of the PHP reference app (NENE2 FT298), against the HTTP API. */
describe('circuitlog-compatible API', () => {
  const fail = (t: ReturnType<typeof buildApp>, name: string, threshold = 3) =>
    t.request('POST', `/circuits/${name}/call`, { success: false, threshold });

  it('starts a new circuit closed', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/circuits/svc/call', { success: true });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({ result: 'success', circuit: { name: 'svc', state: 'closed', failure_count: 0 } });
  });

  it('opens at threshold 3 after 3 failures, the third answering 200 failure with state open', async () => {
    const t = buildApp();
    await fail(t, 'svc');
    await fail(t, 'svc');
    const res = await fail(t, 'svc');
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ result: 'failure', circuit: { state: 'open', failure_count: 3 } });
  });

  it('answers 503 while open', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'svc');
    const res = await t.request('POST', '/circuits/svc/call', { success: true });
    expect(res.status).toBe(503);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
  });

  it('stays closed with count 2 after 2 failures under threshold 5', async () => {
    const t = buildApp();
    await fail(t, 'svc', 5);
    await fail(t, 'svc', 5);
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({
      state: 'closed',
      failure_count: 2,
      failure_threshold: 5,
    });
  });

  it('leaves closed with count 0 after fail, fail, success', async () => {
    const t = buildApp();
    await fail(t, 'svc');
    await fail(t, 'svc');
    await t.request('POST', '/circuits/svc/call', { success: true });
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({ state: 'closed', failure_count: 0 });
  });

  it('half-opens after the timeout', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'svc');
    t.clock.advance(30_000);
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({ state: 'half_open' });
  });

  it('does not half-open before the timeout', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'svc');
    t.clock.advance(29_999);
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({ state: 'open' });
  });

  it('closes on a half-open success', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'svc');
    t.clock.advance(30_000);
    const res = await t.request('POST', '/circuits/svc/call', { success: true });
    expect(await res.json()).toMatchObject({
      result: 'success',
      circuit: { state: 'closed', failure_count: 0, open_until: null },
    });
  });

  it('re-opens on a half-open failure with a later open_until', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'svc');
    const first = (await (await t.request('GET', '/circuits/svc')).json()).open_until;
    t.clock.advance(30_000);
    const body = await (await fail(t, 'svc')).json();
    expect(body.circuit.state).toBe('open');
    expect(Date.parse(body.circuit.open_until)).toBeGreaterThan(Date.parse(first));
  });

  it('answers 404 for an unknown circuit', async () => {
    const t = buildApp();
    const res = await t.request('GET', '/circuits/nope');
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ status: 404, code: 'CIRCUIT_NOT_FOUND' });
  });

  it('shows state, count and threshold on GET', async () => {
    const t = buildApp();
    await fail(t, 'svc', 4);
    const body = await (await t.request('GET', '/circuits/svc')).json();
    expect(body).toMatchObject({ name: 'svc', state: 'closed', failure_count: 1, failure_threshold: 4 });
    expect(typeof body.id).toBe('number');
  });

  it('closes on reset', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'svc');
    const res = await t.request('POST', '/circuits/svc/reset');
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ state: 'closed', failure_count: 0, open_until: null });
    expect((await t.request('POST', '/circuits/nope/reset')).status).toBe(404);
  });

  it('carries open_until in the 503', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'svc');
    const res = await t.request('POST', '/circuits/svc/call', {});
    expect(await res.json()).toMatchObject({ open_until: '2026-11-30T03:30:30.000Z' });
  });

  it('records last_failure_at', async () => {
    const t = buildApp();
    t.clock.advance(1_234);
    await fail(t, 'svc');
    expect(await (await t.request('GET', '/circuits/svc')).json()).toMatchObject({
      last_failure_at: '2026-11-30T03:30:01.234Z',
    });
  });

  it('isolates circuits by name', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await fail(t, 'payment-gateway%2Fcharge');
    expect((await (await t.request('GET', '/circuits/payment-gateway%2Fcharge')).json()).state).toBe('open');
    expect((await t.request('POST', '/circuits/payment-gateway%2Frefund/call', {})).status).toBe(200);
    expect((await t.request('GET', '/circuits/payment-gateway%2Frefund')).status).toBe(200);
  });

  it('records through /success and /failure, creating the circuit with defaults', async () => {
    const t = buildApp();
    const failed = await (await t.request('POST', '/circuits/mail/failure', { timeout_seconds: 7 })).json();
    expect(failed).toMatchObject({ state: 'closed', failure_count: 1, failure_threshold: 5, timeout_seconds: 30 });
    const ok = await (await t.request('POST', '/circuits/mail/success')).json();
    expect(ok).toMatchObject({ state: 'closed', failure_count: 0 });
  });

  it("applies timeout_seconds to the opening it causes, never to the circuit's policy (circuitlog's recordFailure)", async () => {
    const t = buildApp();
    for (let i = 0; i < 2; i++) await t.request('POST', '/circuits/mail/failure', { timeout_seconds: 60 });
    expect(await (await t.request('GET', '/circuits/mail')).json()).toMatchObject({
      state: 'closed',
      timeout_seconds: 30,
    });
    for (let i = 0; i < 3; i++) await t.request('POST', '/circuits/mail/failure');
    const opened = await (await t.request('GET', '/circuits/mail')).json();
    expect(opened).toMatchObject({ state: 'open', timeout_seconds: 30, open_until: '2026-11-30T03:30:30.000Z' });
    await t.request('POST', '/circuits/mail/reset');
    const called = await (
      await t.request('POST', '/circuits/mail/call', { success: false, timeout_seconds: 7 })
    ).json();
    expect(called.circuit).toMatchObject({ timeout_seconds: 30, failure_count: 1 });
    for (let i = 0; i < 4; i++) await t.request('POST', '/circuits/mail/call', { success: false, timeout_seconds: 7 });
    expect(await (await t.request('GET', '/circuits/mail')).json()).toMatchObject({
      state: 'open',
      timeout_seconds: 30,
      effective_timeout_seconds: 7,
      open_until: '2026-11-30T03:30:07.000Z',
    });
  });
});
