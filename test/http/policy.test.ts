import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import type { UpstreamClient } from '../../src/proxy/upstream-client.js';
import { buildApp } from '../helper.js';

type App = ReturnType<typeof buildApp>;
const MERGE = { 'content-type': 'application/merge-patch+json' };
const json = async (res: Response) => (await res.json()) as any;
const get = async (t: App, name: string) => json(await t.request('GET', `/circuits/${name}`));
const fail = (t: App, name: string) => t.request('POST', `/circuits/${name}/outcomes`, { success: false });
const patch = (t: App, name: string, body: unknown) =>
  t.request('PATCH', `/circuits/${name}`, JSON.stringify(body), MERGE);

describe("circuitlog's 503 body", () => {
  it('POST /call on an open circuit answers the whole circuit as `circuit`, with open_until, code and Retry-After', async () => {
    const t = buildApp();
    for (let i = 0; i < 3; i++) await t.request('POST', '/circuits/svc/call', { success: false, threshold: 3 });
    t.clock.advance(10_000);
    const res = await t.request('POST', '/circuits/svc/call', { success: true });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('20');
    const body = await json(res);
    expect(body).toMatchObject({ code: 'CIRCUIT_OPEN', state: 'open', open_until: '2026-11-30T03:30:30.000Z' });
    expect(body.circuit).toMatchObject({
      name: 'svc',
      state: 'open',
      failure_count: 3,
      open_until: '2026-11-30T03:30:30.000Z',
    });
  });

  it("every circuitlog route answers at least circuitlog's circuit fields", async () => {
    const t = buildApp();
    const fields = ['id', 'name', 'state', 'failure_count', 'failure_threshold', 'open_until', 'last_failure_at'];
    const call = await json(await t.request('POST', '/circuits/svc/call', { success: false }));
    expect(Object.keys(call)).toEqual(['result', 'circuit']);
    const answers = [
      call.circuit,
      await json(await t.request('POST', '/circuits/svc/success')),
      await json(await t.request('POST', '/circuits/svc/failure')),
      await json(await t.request('POST', '/circuits/svc/reset')),
      await get(t, 'svc'),
    ];
    for (const answer of answers) expect(Object.keys(answer)).toEqual(expect.arrayContaining(fields));
    expect((await t.request('GET', '/circuits/nope')).status).toBe(404);
    expect((await t.request('POST', '/circuits/nope/reset')).status).toBe(404);
  });

  it('GET /allowed keeps its own shape: `circuit` is the name', async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await fail(t, 'svc');
    expect((await json(await t.request('GET', '/circuits/svc/allowed'))).circuit).toBe('svc');
  });
});

describe('circuit JSON', () => {
  it('shows every policy field and the run-time figures, with defaults', async () => {
    const t = buildApp();
    await fail(t, 'svc');
    expect(await get(t, 'svc')).toMatchObject({
      success_threshold: 1,
      window: null,
      backoff: null,
      forced_state: null,
      effective_timeout_seconds: 30,
      reopen_count: 0,
      window_stats: null,
    });
  });
});

describe('PATCH /circuits/:name', () => {
  it('creates a missing circuit with the defaults plus the patch (201)', async () => {
    const t = buildApp();
    const res = await patch(t, 'svc', { success_threshold: 2, window: { type: 'count', size: 20 } });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe('/circuits/svc');
    expect(await json(res)).toMatchObject({
      name: 'svc',
      state: 'closed',
      failure_threshold: 5,
      success_threshold: 2,
      window: {
        type: 'count',
        size: 20,
        minimum_calls: 20,
        failure_rate_threshold: 50,
        slow_call_duration_ms: null,
        slow_call_rate_threshold: 100,
      },
      window_stats: { calls: 0, failures: 0, slow_calls: 0, failure_rate: 0, slow_call_rate: 0 },
    });
  });

  it('merges into an existing circuit (200), keeping counts and state, and accepts application/json', async () => {
    const t = buildApp();
    await fail(t, 'svc');
    await fail(t, 'svc');
    const res = await t.request('PATCH', '/circuits/svc', { failure_threshold: 10 });
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({
      failure_threshold: 10,
      timeout_seconds: 30,
      failure_count: 2,
      state: 'closed',
    });
  });

  it('merges nested members (RFC 7396) and empties the window only when it changes', async () => {
    const t = buildApp();
    await patch(t, 'svc', { window: { type: 'count', size: 10, failure_rate_threshold: 90 } });
    await fail(t, 'svc');
    expect((await json(await patch(t, 'svc', { failure_threshold: 7 }))).window_stats.calls).toBe(1);
    const changed = await json(await patch(t, 'svc', { window: { slow_call_duration_ms: 500 } }));
    expect(changed.window).toMatchObject({
      type: 'count',
      size: 10,
      failure_rate_threshold: 90,
      slow_call_duration_ms: 500,
    });
    expect(changed.window_stats.calls).toBe(0);
  });

  it('null removes a window or backoff and returns other fields to their default', async () => {
    const t = buildApp();
    await patch(t, 'svc', { failure_threshold: 9, window: { type: 'time', size: 60 }, backoff: { multiplier: 3 } });
    const body = await json(await patch(t, 'svc', { failure_threshold: null, window: null, backoff: null }));
    expect(body).toMatchObject({ failure_threshold: 5, window: null, backoff: null });
  });

  it('answers 422 naming each invalid field, and changes nothing', async () => {
    const t = buildApp();
    await patch(t, 'svc', { failure_threshold: 4 });
    const before = await get(t, 'svc');
    const res = await patch(t, 'svc', {
      success_threshold: 1001,
      window: { type: 'count', size: 10, minimum_calls: 11, failure_rate_threshold: 0 },
      backoff: { multiplier: 1 },
      forced_state: 'half_open',
      colour: 'red',
    });
    expect(res.status).toBe(422);
    const fields = (await json(res)).errors.map((e: { field: string }) => e.field).sort();
    expect(fields).toEqual([
      'backoff.multiplier',
      'colour',
      'forced_state',
      'success_threshold',
      'window.failure_rate_threshold',
      'window.minimum_calls',
    ]);
    expect(await get(t, 'svc')).toEqual(before);
  });

  it('checks rules across fields and sizes by window type', async () => {
    const t = buildApp();
    const res = await patch(t, 'svc', {
      timeout_seconds: 60,
      backoff: { max_timeout_seconds: 30 },
      window: { type: 'time', size: 3601 },
    });
    expect(res.status).toBe(422);
    expect((await json(res)).errors.map((e: { field: string }) => e.field).sort()).toEqual([
      'backoff.max_timeout_seconds',
      'window.size',
    ]);
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('refuses a body that is not an object, and a non-JSON content type', async () => {
    const t = buildApp();
    expect((await t.request('PATCH', '/circuits/svc', '[1]', MERGE)).status).toBe(422);
    expect((await t.request('PATCH', '/circuits/svc', '{}', { 'content-type': 'text/plain' })).status).toBe(415);
  });
});

describe('forced states over HTTP', () => {
  it('forced open refuses /allowed and /call with CIRCUIT_FORCED_OPEN and logs forced_open', async () => {
    const t = buildApp();
    await patch(t, 'svc', { forced_state: 'open' });
    const allowed = await t.request('GET', '/circuits/svc/allowed');
    expect(allowed.status).toBe(503);
    expect(await json(allowed)).toMatchObject({
      code: 'CIRCUIT_FORCED_OPEN',
      state: 'closed',
      forced_state: 'open',
      type: '/problems/circuit-forced-open',
    });
    const call = await t.request('POST', '/circuits/svc/call', { success: true });
    expect((await json(call)).code).toBe('CIRCUIT_FORCED_OPEN');
    const events = (await json(await t.request('GET', '/circuits/svc/events'))).events;
    expect(events[0]).toMatchObject({ from: 'closed', to: 'closed', reason: 'forced_open' });
  });

  it('forced closed admits calls on an open circuit; clearing restores the refusal', async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await fail(t, 'svc');
    await patch(t, 'svc', { forced_state: 'closed' });
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
    expect((await get(t, 'svc')).state).toBe('open');
    await patch(t, 'svc', { forced_state: null });
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    const reasons = (await json(await t.request('GET', '/circuits/svc/events'))).events.map(
      (e: { reason: string }) => e.reason,
    );
    expect(reasons.slice(0, 2)).toEqual(['force_cleared', 'forced_closed']);
  });
});

describe('late outcomes', () => {
  it('POST /outcomes on an open circuit changes no state and no open time, but counts', async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await fail(t, 'svc');
    const opened = await get(t, 'svc');
    t.clock.advance(5_000);
    const afterSuccess = await json(await t.request('POST', '/circuits/svc/outcomes', { success: true }));
    expect(afterSuccess).toMatchObject({ state: 'open', open_until: opened.open_until });
    const afterFailure = await json(await fail(t, 'svc'));
    expect(afterFailure).toMatchObject({ state: 'open', open_until: opened.open_until, failure_count: 6 });
  });

  it("circuitlog's /success still closes an open circuit", async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await fail(t, 'svc');
    expect((await json(await t.request('POST', '/circuits/svc/success'))).state).toBe('closed');
  });
});

describe('windows, success threshold and backoff over HTTP', () => {
  it('opens on the failure rate of a count window, with the reason in /events', async () => {
    const t = buildApp();
    await patch(t, 'svc', { window: { type: 'count', size: 4 } });
    for (const success of [true, false, true]) await t.request('POST', '/circuits/svc/outcomes', { success });
    const res = await json(await fail(t, 'svc'));
    expect(res.state).toBe('open');
    expect((await json(await t.request('GET', '/circuits/svc/events'))).events[0].reason).toBe('failure_rate_exceeded');
  });

  it('window_stats of a time window are as of now in a GET', async () => {
    const t = buildApp();
    await patch(t, 'svc', { window: { type: 'time', size: 10, slow_call_duration_ms: 100 } });
    await t.request('POST', '/circuits/svc/outcomes', { success: true, duration_ms: 250 });
    expect((await get(t, 'svc')).window_stats).toEqual({
      calls: 1,
      failures: 0,
      slow_calls: 1,
      failure_rate: 0,
      slow_call_rate: 100,
    });
    t.clock.advance(10_000);
    expect((await get(t, 'svc')).window_stats.calls).toBe(0);
  });

  it('needs success_threshold good probes and grows the open time with backoff', async () => {
    const t = buildApp();
    await patch(t, 'svc', {
      failure_threshold: 1,
      success_threshold: 2,
      backoff: { multiplier: 2, max_timeout_seconds: 100 },
    });
    await fail(t, 'svc');
    t.clock.advance(30_000);
    await t.request('GET', '/circuits/svc/allowed');
    const reopened = await json(await fail(t, 'svc'));
    expect(reopened).toMatchObject({ state: 'open', effective_timeout_seconds: 60, reopen_count: 1 });
    t.clock.advance(60_000);
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    expect((await get(t, 'svc')).state).toBe('half_open');
    const closed = await json(await t.request('POST', '/circuits/svc/outcomes', { success: true }));
    expect(closed).toMatchObject({ state: 'closed', effective_timeout_seconds: 30, reopen_count: 0 });
  });
});

describe('DELETE /circuits/:name', () => {
  it('deletes the circuit and its events (204), then 404', async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await fail(t, 'svc');
    const res = await t.request('DELETE', '/circuits/svc');
    expect(res.status).toBe(204);
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
    expect((await t.request('GET', '/circuits/svc/events')).status).toBe(404);
    expect((await json(await t.request('DELETE', '/circuits/svc'))).code).toBe('CIRCUIT_NOT_FOUND');
  });

  it("refuses a proxy node's circuit with 409, which PATCH may still change", async () => {
    const config = parseConfigText(
      'local_dc: dc1\nupstreams:\n  api:\n    success_threshold: 3\n    nodes:\n      - { id: n1, dc: dc1, url: "http://127.0.0.1:9" }\n',
      'test',
    );
    const client = {
      request: () => Promise.reject(new Error('unused')),
      close: async () => {},
    } as unknown as UpstreamClient;
    const t = buildApp({ proxy: { localDc: 'dc1', upstreams: config.upstreams, client } });
    expect((await get(t, 'api%2Fn1')).success_threshold).toBe(3);
    const res = await t.request('DELETE', '/circuits/api%2Fn1');
    expect(res.status).toBe(409);
    expect((await json(res)).code).toBe('CIRCUIT_DEFINED_BY_CONFIG');
    expect((await patch(t, 'api%2Fn1', { success_threshold: 1 })).status).toBe(200);
  });
});

describe('POST /outcomes (batch)', () => {
  it('applies the items in order and answers each circuit with its state after it', async () => {
    const t = buildApp();
    const outcomes = [
      ...Array.from({ length: 5 }, () => ({ circuit: 'a', success: false })),
      { circuit: 'b', success: true, duration_ms: 3 },
      { circuit: 'a', success: true },
    ];
    const res = await t.request('POST', '/outcomes', { outcomes });
    expect(res.status).toBe(200);
    const states = (await json(res)).results.map((r: { circuit: string; state: string }) => `${r.circuit}:${r.state}`);
    expect(states).toEqual(['a:closed', 'a:closed', 'a:closed', 'a:closed', 'a:open', 'b:closed', 'a:open']);
  });

  it('rejects the whole batch for one bad item, naming its index, and records nothing', async () => {
    const t = buildApp();
    const outcomes = [
      { circuit: 'a', success: false },
      { circuit: 'a', success: false },
      { circuit: 'bad name', success: true },
      { circuit: 'a', success: 'false' },
    ];
    const res = await t.request('POST', '/outcomes', { outcomes });
    expect(res.status).toBe(422);
    expect((await json(res)).errors.map((e: { field: string }) => e.field)).toEqual([
      'outcomes.2.circuit',
      'outcomes.3.success',
    ]);
    expect((await t.request('GET', '/circuits/a')).status).toBe(404);
  });

  it('answers 204 with no body for Prefer: return=minimal (RFC 7240), having recorded every item', async () => {
    const t = buildApp();
    const outcomes = Array.from({ length: 5 }, () => ({ circuit: 'a', success: false }));
    for (const prefer of ['return=minimal', 'respond-async, RETURN="minimal"; x=1']) {
      const res = await t.request('POST', '/outcomes', { outcomes }, { prefer });
      expect(res.status).toBe(204);
      expect(res.headers.get('preference-applied')).toBe('return=minimal');
      expect(await res.text()).toBe('');
    }
    expect(await get(t, 'a')).toMatchObject({ state: 'open', failure_count: 10 });
    const full = await t.request('POST', '/outcomes', { outcomes }, { prefer: 'return=representation' });
    expect(full.status).toBe(200);
    expect(full.headers.get('preference-applied')).toBeNull();
    expect((await json(full)).results).toHaveLength(5);
    const bad = await t.request(
      'POST',
      '/outcomes',
      { outcomes: [{ circuit: 'b', success: 1 }] },
      { prefer: 'return=minimal' },
    );
    expect(bad.status).toBe(422); // a bad batch is still a problem document, and records nothing
    expect((await t.request('GET', '/circuits/b')).status).toBe(404);
  });

  it('takes the first instance of the return preference (RFC 7240 section 2)', async () => {
    const t = buildApp();
    const outcomes = [{ circuit: 'a', success: false }];
    const minimal = [
      'return=minimal, return=representation',
      'handling=lenient, return=minimal; x=1, return=representation',
    ];
    for (const prefer of minimal) {
      expect((await t.request('POST', '/outcomes', { outcomes }, { prefer })).status).toBe(204);
    }
    for (const prefer of ['return=representation, return=minimal', 'RETURN=representation,return=minimal']) {
      const res = await t.request('POST', '/outcomes', { outcomes }, { prefer });
      expect(res.status).toBe(200);
      expect(res.headers.get('preference-applied')).toBeNull();
    }
    expect((await get(t, 'a')).failure_count).toBe(4);
  });

  it('needs the bearer token when one is configured', async () => {
    const t = buildApp({ token: 'policy-token-0123456789' });
    const body = { outcomes: [{ circuit: 'a', success: false }] };
    expect((await t.request('POST', '/outcomes', body)).status).toBe(401);
    expect(
      (await t.request('POST', '/outcomes', body, { authorization: 'Bearer policy-token-0123456789' })).status,
    ).toBe(200);
  });

  it('takes 1 to 1,000 items, 1,000 with 200-character names fitting the body limit', async () => {
    const t = buildApp();
    expect((await t.request('POST', '/outcomes', { outcomes: [] })).status).toBe(422);
    const name = 'n'.repeat(200);
    const many = (n: number) =>
      Array.from({ length: n }, () => ({ circuit: name, success: false, duration_ms: 86_399_999.999 }));
    expect((await t.request('POST', '/outcomes', { outcomes: many(1_001) })).status).toBe(422);
    const res = await t.request('POST', '/outcomes', { outcomes: many(1_000) });
    expect(res.status).toBe(200);
    expect((await get(t, name)).failure_count).toBe(1_000); // threshold 5 opened it; late failures still count
  });
});

describe('group commit', () => {
  it('applies concurrent outcomes in fewer transactions, with exact counts', async () => {
    const t = buildApp({ circuitDefaults: { failureThreshold: 1_000_000, timeoutSeconds: 30, halfOpenMaxCalls: 1 } });
    const applyBatch = t.store.applyBatch.bind(t.store);
    let transactions = 0;
    t.store.applyBatch = (items) => {
      transactions++;
      return applyBatch(items);
    };
    const answers = await Promise.all(Array.from({ length: 50 }, () => fail(t, 'svc')));
    expect(answers.every((r) => r.status === 200)).toBe(true);
    expect(transactions).toBeLessThan(50);
    expect((await get(t, 'svc')).failure_count).toBe(50);
  });

  it('with group commit off, applies each outcome in its own transaction, as exactly', async () => {
    const t = buildApp({
      groupCommit: false,
      circuitDefaults: { failureThreshold: 1_000_000, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    });
    const apply = t.store.apply.bind(t.store);
    let transactions = 0;
    t.store.apply = (name, step) => {
      transactions++;
      return apply(name, step);
    };
    await Promise.all(Array.from({ length: 20 }, () => fail(t, 'svc')));
    expect(transactions).toBe(20);
    expect((await get(t, 'svc')).failure_count).toBe(20);
    expect(
      (await json(await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'svc', success: false }] }))).results,
    ).toEqual([{ circuit: 'svc', state: 'closed' }]);
  });

  it('answers no caller before its transaction committed: a failed commit fails every caller in it', async () => {
    const t = buildApp();
    const applyBatch = t.store.applyBatch.bind(t.store);
    let failNext = true;
    t.store.applyBatch = (items) => {
      if (failNext) {
        failNext = false;
        throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
      }
      return applyBatch(items);
    };
    const answers = await Promise.all(Array.from({ length: 10 }, () => fail(t, 'svc')));
    expect(answers.map((r) => r.status)).toEqual(Array(10).fill(500));
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });
});

describe('time and listing (issue 7)', () => {
  it('a wall clock stepping back 1 h does not keep a 2 s circuit open for an hour', async () => {
    const t = buildApp();
    await patch(t, 'svc', { timeout_seconds: 2, failure_threshold: 1 });
    await fail(t, 'svc');
    t.clock.advance(-3_600_000);
    const res = await t.request('GET', '/circuits/svc/allowed');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    t.clock.advance(2_000);
    expect((await t.request('GET', '/circuits/svc/allowed')).status).toBe(200);
  });
});
