import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

type App = ReturnType<typeof buildApp>;
const MERGE = { 'content-type': 'application/merge-patch+json' };
// biome-ignore lint/suspicious/noExplicitAny: answers are read as loose JSON, as in the other HTTP suites
const json = async (res: Response) => (await res.json()) as any;
const patch = (t: App, name: string, body: unknown) =>
  t.request('PATCH', `/circuits/${name}`, JSON.stringify(body), MERGE);
const get = async (t: App, name: string) => json(await t.request('GET', `/circuits/${name}`));
const outcome = (t: App, name: string, success: boolean) =>
  t.request('POST', `/circuits/${name}/outcomes`, { success });

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A scripted random source: answers `values` in turn, then 0.999 (admit). */
function scripted(values: number[]): () => number {
  return () => values.shift() ?? 0.999;
}

/** The app with a circuit `dep` that never opens on its own (threshold 10^9) and throttles as `throttle`. */
async function throttledApp(random: () => number, throttle: unknown = { k: 2, window_seconds: 10 }) {
  const t = buildApp({ random });
  const res = await patch(t, 'dep', { failure_threshold: 1_000_000_000, throttle });
  expect(res.status).toBe(201);
  return t;
}

describe('soft throttling over HTTP', () => {
  it('PATCH sets throttle with its defaults filled in, GET shows it with the probability and counts', async () => {
    const t = buildApp();
    const res = await patch(t, 'dep', { throttle: {} });
    expect(res.status).toBe(201);
    const c = await get(t, 'dep');
    expect(c.throttle).toEqual({ k: 2, window_seconds: 60 });
    expect(c.throttle_probability).toBe(0);
    expect(c.throttle_window).toEqual({ requests: 0, accepts: 0 });
    expect((await get(t, 'other')).code).toBe('CIRCUIT_NOT_FOUND');
  });

  it('a circuit without a throttle shows throttle null, probability 0 and no counts', async () => {
    const t = buildApp();
    await outcome(t, 'plain', false);
    const c = await get(t, 'plain');
    expect(c).toMatchObject({ throttle: null, throttle_probability: 0, throttle_window: null });
  });

  it('refuses bad throttle fields with 422 naming each, and changes nothing', async () => {
    const t = buildApp();
    await patch(t, 'dep', { throttle: { k: 3 } });
    for (const bad of [
      { k: 0.5 },
      { k: 101 },
      { window_seconds: 0 },
      { window_seconds: 601 },
      { window_seconds: 1.5 },
      { k: '2' },
      { kk: 2 },
      'on',
    ]) {
      const res = await patch(t, 'dep', { throttle: bad });
      expect(res.status, JSON.stringify(bad)).toBe(422);
      expect((await json(res)).errors[0].field).toMatch(/^throttle/);
    }
    expect((await get(t, 'dep')).throttle).toEqual({ k: 3, window_seconds: 60 });
  });

  it('merge-patches throttle members, and null turns it off', async () => {
    const t = buildApp();
    await patch(t, 'dep', { throttle: { k: 3, window_seconds: 20 } });
    await patch(t, 'dep', { throttle: { window_seconds: 30 } });
    expect((await get(t, 'dep')).throttle).toEqual({ k: 3, window_seconds: 30 });
    await patch(t, 'dep', { throttle: { k: null } });
    expect((await get(t, 'dep')).throttle).toEqual({ k: 2, window_seconds: 30 });
    await patch(t, 'dep', { throttle: null });
    expect((await get(t, 'dep')).throttle).toBeNull();
  });

  it('GET /allowed answers 503 circuit-throttled with Retry-After 1 and the probability, the circuit still closed', async () => {
    const t = await throttledApp(scripted([0.1]));
    for (let i = 0; i < 10; i++) await outcome(t, 'dep', i < 3); // p = (10 - 2*3) / 11
    const res = await t.request('GET', '/circuits/dep/allowed');
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    const body = await json(res);
    expect(body).toMatchObject({
      type: '/problems/circuit-throttled',
      code: 'CIRCUIT_THROTTLED',
      status: 503,
      circuit: 'dep',
      state: 'closed',
      open_until: null,
    });
    expect(body.throttle_probability).toBe(4 / 11);
    const c = await get(t, 'dep');
    expect(c.state).toBe('closed');
    expect(c.failure_count).toBe(7); // the refusal is not an outcome
    expect(c.throttle_window).toEqual({ requests: 11, accepts: 3 }); // but it is a request
    expect(c.throttle_probability).toBe(5 / 12);
  });

  it('GET /allowed admits when the draw is at or above the probability', async () => {
    const t = await throttledApp(scripted([4 / 11]));
    for (let i = 0; i < 10; i++) await outcome(t, 'dep', i < 3);
    const res = await t.request('GET', '/circuits/dep/allowed');
    expect(res.status).toBe(200);
    expect((await get(t, 'dep')).throttle_window).toEqual({ requests: 10, accepts: 3 });
  });

  it('POST /call applies it: a throttled call is refused and its outcome not recorded', async () => {
    const t = await throttledApp(scripted([0.1]));
    for (let i = 0; i < 10; i++) await outcome(t, 'dep', i < 3);
    const res = await t.request('POST', '/circuits/dep/call', { success: false });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    const body = await json(res);
    expect(body.code).toBe('CIRCUIT_THROTTLED');
    expect(body.circuit).toMatchObject({ name: 'dep', state: 'closed', failure_count: 7 });
    const admitted = await t.request('POST', '/circuits/dep/call', { success: true }); // next draw 0.999
    expect(admitted.status).toBe(200);
    expect((await get(t, 'dep')).throttle_window).toEqual({ requests: 12, accepts: 4 });
  });

  it('never throttles a healthy dependency', async () => {
    const t = await throttledApp(() => 0);
    for (let i = 0; i < 50; i++) {
      expect((await t.request('GET', '/circuits/dep/allowed')).status).toBe(200);
      await outcome(t, 'dep', true);
    }
    expect((await get(t, 'dep')).throttle_probability).toBe(0);
  });

  it('a dependency that starts failing 60% of calls sees its admitted rate fall as the formula says, the circuit still closed', async () => {
    const window = 10; // s
    const t = await throttledApp(seeded(21), { k: 2, window_seconds: window });
    const dependency = seeded(7);
    const perSecond = 40;
    const healthySeconds = window; // a window of successes first, then 60% failures
    const failingSeconds = 3 * window;
    const ledger: { at: number; accepted: boolean }[] = []; // the test's own record of requests
    const formula = (now: number) => {
      const first = Math.floor(now / 1000) - window + 1;
      const live = ledger.filter((r) => Math.floor(r.at / 1000) >= first);
      const accepts = live.filter((r) => r.accepted).length;
      return Math.max(0, (live.length - 2 * accepts) / (live.length + 1));
    };
    const slices: { admitted: number; attempts: number; expected: number }[] = [];
    for (let s = 0; s < healthySeconds + failingSeconds; s++) {
      const failing = s >= healthySeconds;
      if (failing && (s - healthySeconds) % 5 === 0) slices.push({ admitted: 0, attempts: 0, expected: 0 });
      for (let i = 0; i < perSecond; i++) {
        const now = t.clock.now();
        const p = formula(now);
        const res = await t.request('GET', '/circuits/dep/allowed');
        const admitted = res.status === 200;
        if (!admitted) {
          expect(res.status).toBe(503);
          expect((await json(res)).code).toBe('CIRCUIT_THROTTLED');
          ledger.push({ at: now, accepted: false });
        } else {
          const success = !failing || dependency() >= 0.6;
          expect((await outcome(t, 'dep', success)).status).toBe(200);
          ledger.push({ at: now, accepted: success });
        }
        if (failing) {
          const slice = slices.at(-1)!;
          slice.attempts++;
          slice.expected += 1 - p;
          if (admitted) slice.admitted++;
        } else {
          expect(admitted).toBe(true); // a healthy dependency is never throttled
        }
        t.clock.advance(1000 / perSecond);
      }
    }
    const shares = slices.map((x) => ({ admitted: x.admitted / x.attempts, formula: x.expected / x.attempts }));
    for (const share of shares)
      expect(Math.abs(share.admitted - share.formula), JSON.stringify(shares)).toBeLessThanOrEqual(0.1);
    // The load fell smoothly: nearly every call got through in the first 5 s of failures, far fewer 30 s on.
    expect(shares[0]!.admitted).toBeGreaterThan(0.9);
    expect(shares.at(-1)!.admitted).toBeLessThan(0.5);
    const c = await get(t, 'dep');
    expect(c.state).toBe('closed');
    expect(c.throttle_probability).toBeCloseTo(formula(t.clock.now()), 12);
  });
});
