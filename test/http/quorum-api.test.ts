// Issue 17 through the HTTP API, with a fake clock, on SQLite and (project redis) on Redis.
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { buildApp } from '../helper.js';

type App = ReturnType<typeof buildApp>;
const MERGE = { 'content-type': 'application/merge-patch+json' };
const json = async (res: Response) => (await res.json()) as any;
const patch = (t: App, name: string, body: unknown) =>
  t.request('PATCH', `/circuits/${name}`, JSON.stringify(body), MERGE);
const outcome = (t: App, name: string, success: boolean, caller?: string) =>
  t.request('POST', `/circuits/${name}/outcomes`, caller === undefined ? { success } : { success, caller });
const allowed = (t: App, name: string, caller?: string) =>
  t.request('GET', `/circuits/${name}/allowed${caller === undefined ? '' : `?caller=${encodeURIComponent(caller)}`}`);
const T0 = '2026-11-30T03:30:00.000Z';

/** A circuit `svc` with a quorum of 2 and failure_threshold 3; `bad` isolated by three failures of its own. */
async function isolated(extra: Record<string, unknown> = {}): Promise<App> {
  const t = buildApp();
  expect(
    (await patch(t, 'svc', { failure_threshold: 3, timeout_seconds: 30, quorum: { min_callers: 2 }, ...extra })).status,
  ).toBe(201);
  for (let i = 0; i < 3; i++) expect((await outcome(t, 'svc', false, 'bad')).status).toBe(200);
  return t;
}

describe('policy field quorum', () => {
  it('is set by PATCH with its defaults filled, shown on the circuit, and removed by null', async () => {
    const t = buildApp();
    const made = await json(await patch(t, 'svc', { quorum: { min_callers: 3 } }));
    expect(made.quorum).toEqual({ min_callers: 3, window_seconds: 60, max_callers: 1_000 });
    expect(made.isolated_callers).toEqual([]);
    expect((await json(await patch(t, 'svc', { quorum: { max_callers: 10 } }))).quorum).toEqual({
      min_callers: 3,
      window_seconds: 60,
      max_callers: 10,
    });
    expect((await json(await patch(t, 'svc', { quorum: null }))).quorum).toBeNull();
  });

  it('refuses a quorum out of bounds with 422 naming each member, and changes nothing', async () => {
    const t = buildApp();
    await patch(t, 'svc', { quorum: { min_callers: 3 } });
    for (const [quorum, field] of [
      [{ min_callers: 1 }, 'quorum.min_callers'],
      [{ min_callers: 1_001 }, 'quorum.min_callers'],
      [{ min_callers: 5, max_callers: 4 }, 'quorum.max_callers'],
      [{ min_callers: 2, max_callers: 1_001 }, 'quorum.max_callers'],
      [{ min_callers: 2, max_callers: 100_000 }, 'quorum.max_callers'],
      [{ min_callers: 2, window_seconds: 0 }, 'quorum.window_seconds'],
      [{ min_callers: 2, extra: 1 }, 'quorum.extra'],
    ] as const) {
      const res = await patch(t, 'svc', { quorum });
      expect(res.status).toBe(422);
      expect((await json(res)).errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect((await json(await t.request('GET', '/circuits/svc'))).quorum).toEqual({
      min_callers: 3,
      window_seconds: 60,
      max_callers: 1_000,
    });
  });

  it('is taken by config-as-code (circuit_defaults, circuits, upstream blocks)', () => {
    const config = parseConfigText(
      [
        'circuit_defaults:',
        '  quorum: {min_callers: 2}',
        'circuits:',
        '  pay: {quorum: {min_callers: 4, window_seconds: 30, max_callers: 50}}',
        'local_dc: a',
        'upstreams:',
        '  api:',
        '    quorum: {min_callers: 3}',
        '    nodes: [{id: n1, dc: a, url: "http://127.0.0.1:9"}]',
      ].join('\n'),
      'f',
    );
    expect(config.circuit_defaults.quorum).toEqual({ min_callers: 2 });
    expect(config.circuits.pay?.quorum).toEqual({ min_callers: 4, window_seconds: 30, max_callers: 50 });
    expect(config.upstreams.api?.quorum).toEqual({ min_callers: 3 });
    expect(() => parseConfigText('circuits:\n  pay: {quorum: {min_callers: 1}}\n', 'f')).toThrow(/quorum/);
  });
});

describe('caller ids', () => {
  it('refuses a bad ?caller= with 400 naming the parameter', async () => {
    const t = buildApp();
    for (const bad of ['', 'a b', 'x'.repeat(129), 'é']) {
      const res = await allowed(t, 'svc', bad);
      expect(res.status).toBe(400);
      expect((await json(res)).errors).toEqual([expect.objectContaining({ field: 'caller' })]);
    }
    expect((await allowed(t, 'svc', 'host-1.dc_a:8080/42~x')).status).toBe(200);
  });

  it('refuses a bad caller on an outcome or a batch item with 422, recording nothing', async () => {
    const t = buildApp();
    const one = await outcome(t, 'svc', false, 'no spaces');
    expect(one.status).toBe(422);
    expect((await json(one)).errors.map((e: { field: string }) => e.field)).toEqual(['caller']);
    const batch = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'svc', success: false, caller: 'ok' },
        { circuit: 'svc', success: false, caller: 7 },
      ],
    });
    expect(batch.status).toBe(422);
    expect((await json(batch)).errors.map((e: { field: string }) => e.field)).toEqual(['outcomes.1.caller']);
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('refuses a batch naming more than 100 distinct callers with 422 naming the first past it, recording nothing', async () => {
    const t = buildApp();
    await patch(t, 'svc', { failure_threshold: 1_000, quorum: { min_callers: 2 } });
    const caller = (i: number) => String(i).padStart(128, 'c');
    // 100 distinct callers, each named twice, then a 101st: only that item is past the bound.
    const outcomes = [];
    for (let i = 0; i < 200; i++) outcomes.push({ circuit: 'svc', success: false, caller: caller(i % 100) });
    outcomes.push({ circuit: 'svc', success: false, caller: caller(100) });
    const res = await t.request('POST', '/outcomes', { outcomes });
    expect(res.status).toBe(422);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((await json(res)).errors.map((e: { field: string }) => e.field)).toEqual(['outcomes.200.caller']);
    const after = await json(await t.request('GET', '/circuits/svc'));
    expect(after.failure_count).toBe(0);
    expect((await t.request('POST', '/outcomes', { outcomes: outcomes.slice(0, 200) })).status).toBe(200);
    expect((await json(await t.request('GET', '/circuits/svc'))).failure_count).toBe(200);
  });

  it('says so in the OpenAPI document of POST /outcomes', async () => {
    const doc = await json(await buildApp().request('GET', '/openapi.json'));
    expect(doc.paths['/outcomes'].post.responses['422'].description).toMatch(/more than 100 distinct callers/);
  });

  it('counts a named outcome of a batch toward the quorum', async () => {
    const t = buildApp();
    await patch(t, 'svc', { failure_threshold: 2, quorum: { min_callers: 2 } });
    const outcomes = [
      { circuit: 'svc', success: false, caller: 'a' },
      { circuit: 'svc', success: false, caller: 'b' },
    ];
    expect(await json(await t.request('POST', '/outcomes', { outcomes }))).toEqual({
      results: [
        { circuit: 'svc', state: 'closed' },
        { circuit: 'svc', state: 'open' },
      ],
    });
  });
});

describe('caller isolation over HTTP', () => {
  it('answers the isolated caller 503 circuit-open with scope caller, Retry-After and its own open_until; others are allowed', async () => {
    const t = await isolated();
    t.clock.advance(10_000);
    const res = await allowed(t, 'svc', 'bad');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('20');
    expect(await json(res)).toMatchObject({
      code: 'CIRCUIT_OPEN',
      scope: 'caller',
      caller: 'bad',
      circuit: 'svc',
      state: 'closed',
      open_until: '2026-11-30T03:30:30.000Z',
    });
    expect((await allowed(t, 'svc', 'good')).status).toBe(200);
    expect((await allowed(t, 'svc')).status).toBe(200);
  });

  it('lists the isolated callers on GET /circuits/{name}', async () => {
    const t = await isolated();
    const c = await json(await t.request('GET', '/circuits/svc'));
    expect(c).toMatchObject({
      state: 'closed',
      isolated_callers: [{ caller: 'bad', failures: 3, open_until: '2026-11-30T03:30:30.000Z', probe_until: null }],
    });
  });

  it('refuses POST /call?caller= of the isolated caller the same way, with the whole circuit as circuit', async () => {
    const t = await isolated();
    const res = await t.request('POST', '/circuits/svc/call?caller=bad', { success: true });
    expect(res.status).toBe(503);
    const body = await json(res);
    expect(body).toMatchObject({ scope: 'caller', caller: 'bad', open_until: '2026-11-30T03:30:30.000Z' });
    expect(body.circuit).toMatchObject({ name: 'svc', state: 'closed' });
    expect((await t.request('POST', '/circuits/svc/call?caller=good', { success: true })).status).toBe(200);
  });

  it('gives one probe after timeout_seconds, and a success ends the isolation (an event naming the caller)', async () => {
    const t = await isolated();
    t.clock.advance(30_000);
    expect((await allowed(t, 'svc', 'bad')).status).toBe(200);
    expect((await allowed(t, 'svc', 'bad')).status).toBe(503); // the probe holds its slot
    await outcome(t, 'svc', true, 'bad');
    expect((await allowed(t, 'svc', 'bad')).status).toBe(200);
    const { events } = await json(await t.request('GET', '/circuits/svc/events'));
    expect(events[0]).toEqual({
      from: 'closed',
      to: 'closed',
      reason: 'caller_released',
      at: '2026-11-30T03:30:30.000Z',
      callers: ['bad'],
    });
    expect(events).toContainEqual({
      from: 'closed',
      to: 'closed',
      reason: 'caller_isolated',
      at: T0,
      callers: ['bad'],
      until: '2026-11-30T03:30:30.000Z',
    });
  });

  it('names the failing callers of a withheld trip in /events', async () => {
    const t = buildApp();
    await patch(t, 'svc', { failure_threshold: 2, quorum: { min_callers: 3 } });
    await outcome(t, 'svc', false, 'b');
    await outcome(t, 'svc', false, 'a');
    const c = await json(await t.request('GET', '/circuits/svc'));
    expect(c).toMatchObject({ state: 'closed', failure_count: 0 });
    const { events } = await json(await t.request('GET', '/circuits/svc/events'));
    expect(events[0]).toEqual({
      from: 'closed',
      to: 'closed',
      reason: 'trip_withheld',
      at: T0,
      rule: 'failure_threshold_reached',
      callers: ['a', 'b'],
    });
  });
});

describe('detect-only (forced_state closed)', () => {
  it('admits the isolated caller with would_refuse, scope caller, and its retry time', async () => {
    const t = await isolated({ forced_state: 'closed' });
    const body = await json(await allowed(t, 'svc', 'bad'));
    expect(body).toMatchObject({
      allowed: true,
      state: 'closed',
      would_refuse: true,
      would_refuse_scope: 'caller',
      would_retry_at: '2026-11-30T03:30:30.000Z',
    });
    expect(await json(await allowed(t, 'svc', 'good'))).toMatchObject({ allowed: true, would_refuse: false });
  });

  it('admits everyone while the rules hold it open, with would_refuse and the state underneath', async () => {
    const t = buildApp();
    await patch(t, 'svc', { failure_threshold: 1, forced_state: 'closed' });
    await outcome(t, 'svc', false);
    expect(await json(await allowed(t, 'svc'))).toMatchObject({
      allowed: true,
      state: 'open',
      would_refuse: true,
      would_refuse_scope: 'circuit',
    });
    const call = await json(await t.request('POST', '/circuits/svc/call', { success: false }));
    expect(call).toMatchObject({ result: 'failure', would_refuse: true });
    const { events } = await json(await t.request('GET', '/circuits/svc/events'));
    expect(events[0]).toMatchObject({ to: 'open', reason: 'failure_threshold_reached', forced_state: 'closed' });
  });

  it('says nothing of would_refuse on a circuit that is not forced closed', async () => {
    const t = buildApp();
    await outcome(t, 'svc', false);
    expect(Object.keys(await json(await allowed(t, 'svc')))).toEqual(['allowed', 'state', 'circuit']);
  });
});
