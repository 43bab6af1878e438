import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

/** A random source that answers `value` and counts its draws. */
function counting(value: number) {
  const random = Object.assign(
    () => {
      random.draws++;
      return value;
    },
    { draws: 0 },
  );
  return random;
}

async function throttledWithFailures(random: () => number) {
  const t = buildApp({ random });
  await t.request('PATCH', '/circuits/dep', JSON.stringify({ failure_threshold: 1000, throttle: {} }), {
    'content-type': 'application/merge-patch+json',
  });
  for (let i = 0; i < 10; i++) await t.breaker.record('dep', { success: false });
  return t;
}

describe('soft throttling: one draw per call', () => {
  it('peekAllowed leaves a call that needs a draw to allowed, and draws nothing itself', async () => {
    const random = counting(0);
    const t = await throttledWithFailures(random);
    expect(t.breaker.peekAllowed('dep')).toBeUndefined();
    expect(random.draws).toBe(0);
  });

  it('allowed draws exactly once, whatever the store re-runs, and a refusal is written once', async () => {
    const random = counting(0);
    const t = await throttledWithFailures(random);
    const decision = await t.breaker.allowed('dep');
    expect(decision?.verdict).toMatchObject({ allowed: false, throttled: { probability: 10 / 11 } });
    expect(random.draws).toBe(1);
    const res = await t.request('GET', '/circuits/dep/allowed');
    expect(res.status).toBe(503);
    expect(random.draws).toBe(2); // the route: peek (no draw), then allowed (one draw)
  });

  it('a healthy throttled circuit is answered by peekAllowed without a draw', async () => {
    const random = counting(0);
    const t = buildApp({ random });
    await t.request('PATCH', '/circuits/ok', JSON.stringify({ throttle: {} }), {
      'content-type': 'application/merge-patch+json',
    });
    await t.breaker.record('ok', { success: true });
    expect(t.breaker.peekAllowed('ok')?.verdict).toEqual({ allowed: true });
    expect(random.draws).toBe(0);
  });
});
