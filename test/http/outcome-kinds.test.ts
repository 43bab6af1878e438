import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

// Issue 29 on the wire (docs/api.md "Outcome kinds"): `kind`, `retry_after_seconds` and
// `deadline_ms` on every outcome route, the policy fields, and the 422s naming the field.

type App = ReturnType<typeof buildApp>;
// biome-ignore lint/suspicious/noExplicitAny: answers are read as loose JSON, as in the other HTTP suites
const json = async (r: Response) => (await r.json()) as Record<string, any>;
const get = async (t: App, name: string) => json(await t.request('GET', `/circuits/${name}`));
const outcome = (t: App, name: string, body: unknown) => t.request('POST', `/circuits/${name}/outcomes`, body);

describe('outcome kinds on POST /circuits/:name/outcomes, POST /outcomes and /call', () => {
  it('records kinds as the table says: 20 rejected and short caller deadlines leave the circuit closed', async () => {
    const t = buildApp();
    for (let i = 0; i < 10; i++) {
      expect((await outcome(t, 'svc', { kind: 'rejected' })).status).toBe(200);
      expect((await outcome(t, 'svc', { kind: 'caller_deadline', deadline_ms: 50 })).status).toBe(200);
    }
    expect(await get(t, 'svc')).toMatchObject({ state: 'closed', failure_count: 0 });
    for (let i = 0; i < 5; i++) await outcome(t, 'svc', { kind: 'caller_deadline', deadline_ms: 1_000 });
    expect(await get(t, 'svc')).toMatchObject({ state: 'open' });
  });

  it('takes kinds in a batch and on /call (its result is the kind)', async () => {
    const t = buildApp();
    const batch = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'a', kind: 'failure' },
        { circuit: 'a', kind: 'cancelled' },
        { circuit: 'a', success: false, kind: 'failure' },
      ],
    });
    expect(batch.status).toBe(200);
    expect((await get(t, 'a')).failure_count).toBe(2);
    const called = await json(await t.request('POST', '/circuits/b/call', { kind: 'rejected' }));
    expect(called).toMatchObject({ result: 'rejected', circuit: { failure_count: 0 } });
  });

  it('answers 422 naming kind for an unknown kind, and records nothing', async () => {
    const t = buildApp();
    const r = await outcome(t, 'svc', { kind: 'timeout' });
    expect(r.status).toBe(422);
    expect((await json(r)).errors).toEqual([expect.objectContaining({ field: 'kind' })]);
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('answers 422 naming outcomes.<i>.kind in a batch, and records none of it', async () => {
    const t = buildApp();
    const r = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'a', success: false },
        { circuit: 'a', kind: 'failure' },
        { circuit: 'a', kind: 'bogus' },
      ],
    });
    expect(r.status).toBe(422);
    expect((await json(r)).errors).toEqual([expect.objectContaining({ field: 'outcomes.2.kind' })]);
    expect((await t.request('GET', '/circuits/a')).status).toBe(404);
  });

  it.each([
    [{ success: true, kind: 'failure' }, 'kind', { kind: 'failure' }],
    [{ success: false, kind: 'rejected' }, 'kind', { kind: 'rejected' }],
    [{}, 'success', { kind: 'cancelled' }],
    [{ kind: 'failure', retry_after_seconds: 3 }, 'retry_after_seconds', { kind: 'throttled', retry_after_seconds: 3 }],
    [{ kind: 'throttled', deadline_ms: 30 }, 'deadline_ms', { kind: 'caller_deadline', deadline_ms: 30 }],
    [
      { kind: 'throttled', retry_after_seconds: -1 },
      'retry_after_seconds',
      { kind: 'throttled', retry_after_seconds: 0 },
    ],
    [{ kind: 'caller_deadline', deadline_ms: 0 }, 'deadline_ms', { kind: 'caller_deadline', deadline_ms: 1 }],
  ])('answers 422 for %j naming %s, and takes the outcome put right', async (body, field, fixed) => {
    const t = buildApp();
    const r = await outcome(t, 'svc', body);
    expect(r.status).toBe(422);
    expect((await json(r)).errors.map((e: { field: string }) => e.field)).toContain(field);
    expect((await outcome(t, 'svc', fixed)).status).toBe(200);
  });

  it('answers 422 naming kind on /call for a pair that disagrees, and takes the pair that agrees', async () => {
    const t = buildApp();
    const r = await t.request('POST', '/circuits/svc/call', { success: true, kind: 'cancelled' });
    expect(r.status).toBe(422);
    expect((await json(r)).errors).toEqual([expect.objectContaining({ field: 'kind' })]);
    expect((await t.request('POST', '/circuits/svc/call', { success: true, kind: 'success' })).status).toBe(200);
  });
});

describe('window_kinds: the window by kind', () => {
  it.each(['count', 'time'] as const)(
    'counts every kind reported in a %s window, those the rules ignore too, beside window_stats',
    async (type) => {
      const t = buildApp();
      await t.request('PATCH', '/circuits/svc', { failure_threshold: 100, window: { type, size: 20 } });
      for (const body of [{ success: true }, { success: true }, { success: false }]) await outcome(t, 'svc', body);
      expect((await get(t, 'svc')).window_kinds).toEqual({
        success: 2,
        failure: 1,
        rejected: 0,
        throttled: 0,
        caller_deadline: 0,
        cancelled: 0,
      });
      for (const kind of ['rejected', 'cancelled', 'throttled']) await outcome(t, 'svc', { kind });
      await outcome(t, 'svc', { kind: 'caller_deadline', deadline_ms: 50 });
      const shown = await get(t, 'svc');
      expect(shown.window_kinds).toEqual({
        success: 2,
        failure: 1,
        rejected: 1,
        throttled: 1,
        caller_deadline: 1,
        cancelled: 1,
      });
      expect(shown.window_stats).toMatchObject({ calls: 4, failures: 1 }); // rejected counts as a success
    },
  );

  it('is null without a window, and empties with the window at a state change', async () => {
    const t = buildApp();
    await outcome(t, 'plain', { kind: 'rejected' });
    expect((await get(t, 'plain')).window_kinds).toBeNull();
    await t.request('PATCH', '/circuits/svc', { failure_threshold: 2, window: { type: 'count', size: 10 } });
    await outcome(t, 'svc', { kind: 'cancelled' });
    await outcome(t, 'svc', { kind: 'failure' });
    await outcome(t, 'svc', { kind: 'failure' });
    const opened = await get(t, 'svc');
    expect(opened.state).toBe('open');
    expect(Object.values(opened.window_kinds)).toEqual([0, 0, 0, 0, 0, 0]);
  });
});

describe('the kinds policy fields', () => {
  it('shows every one resolved in the circuit JSON, with the defaults', async () => {
    const t = buildApp();
    await outcome(t, 'svc', { success: true });
    expect(await get(t, 'svc')).toMatchObject({
      count_as: {},
      min_deadline_ms: 1000,
      max_retry_after_seconds: 300,
      throttle_scope: 'circuit',
      ramp: null,
      cool_until: null,
      cooling_callers: [],
      ramp_until: null,
      ramp_percent: 100,
    });
  });

  it('takes them by PATCH: count_as overrides apply, min_deadline_ms null is kept, throttle_scope follows a quorum', async () => {
    const t = buildApp();
    const patched = await t.request('PATCH', '/circuits/svc', {
      count_as: { rejected: 'failure' },
      min_deadline_ms: null,
      ramp: { seconds: 30 },
      quorum: { min_callers: 2 },
    });
    expect(patched.status).toBe(201);
    expect(await json(patched)).toMatchObject({
      count_as: { rejected: 'failure' },
      min_deadline_ms: null,
      throttle_scope: 'caller',
      ramp: { seconds: 30, start_percent: 10 },
    });
    // Another patch keeps them (merge patch); null returns count_as to its default.
    const again = await json(
      await t.request('PATCH', '/circuits/svc', { max_retry_after_seconds: 60, count_as: null }),
    );
    expect(again).toMatchObject({ count_as: {}, min_deadline_ms: null, max_retry_after_seconds: 60 });
    for (let i = 0; i < 5; i++) await outcome(t, 'svc', { kind: 'caller_deadline', deadline_ms: 86_400_000 });
    expect((await get(t, 'svc')).state).toBe('closed');
  });

  it('answers 422 naming the field for a bad one, and changes nothing', async () => {
    const t = buildApp();
    for (const [patch, field] of [
      [{ count_as: { timeout: 'failure' } }, 'count_as.timeout'],
      [{ count_as: { rejected: 'maybe' } }, 'count_as.rejected'],
      [{ min_deadline_ms: 0 }, 'min_deadline_ms'],
      [{ max_retry_after_seconds: 86_401 }, 'max_retry_after_seconds'],
      [{ throttle_scope: 'host' }, 'throttle_scope'],
      [{ ramp: { seconds: 0 } }, 'ramp.seconds'],
      [{ ramp: { seconds: 10, start_percent: 101 } }, 'ramp.start_percent'],
    ] as const) {
      const r = await t.request('PATCH', '/circuits/svc', patch);
      expect(r.status, JSON.stringify(patch)).toBe(422);
      expect((await json(r)).errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });
});
