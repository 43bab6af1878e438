import { describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../src/domain/policy.js';
import type { BreakerObserver } from '../../src/service/breaker-observer.js';
import { BreakerService } from '../../src/service/breaker-service.js';
import { FakeClock, silentLogger } from '../helper.js';
import { everyStore } from '../store/every-store.js';

// Issue 29: GET /allowed on a ramping circuit stays on the fast path (peekAllowed answers from
// memory, no write): the slow start's draw writes nothing, unlike a throttle's refusal.

const { stores } = everyStore();
const settings = { failureThreshold: 2, timeoutSeconds: 30, halfOpenMaxCalls: 1 };

describe.each(stores)('BreakerService.peekAllowed on a ramping circuit (%s)', (_kind, makeStore) => {
  it('answers at once from memory, admitting and refusing by the draw, a refusal told to the observer', async () => {
    const clock = new FakeClock();
    const draws = { value: 0.05 };
    const refused: string[] = [];
    const observer: BreakerObserver = {
      transition: () => {},
      outcome: () => {},
      rejected: (c) => void refused.push(c.name),
    };
    const breaker = new BreakerService({
      store: await makeStore(),
      clock: clock.now,
      logger: silentLogger,
      circuitDefaults: settings,
      policy: { probeLeaseMs: 10_000 },
      observer,
      random: () => draws.value,
    });
    await breaker.configure('svc', () => resolvePolicy({ ...settings, ramp: { seconds: 10, startPercent: 10 } }));
    for (let i = 0; i < 2; i++) await breaker.record('svc', { success: false });
    clock.advance(30_000);
    expect((await breaker.allowed('svc'))?.verdict.allowed).toBe(true); // the probe
    await breaker.record('svc', { success: true });
    await breaker.get('svc'); // in memory (Redis: in its cache)
    const admitted = breaker.peekAllowed('svc');
    expect(admitted?.verdict).toEqual({ allowed: true, rampPercent: 10 });
    draws.value = 0.5;
    const peeked = breaker.peekAllowed('svc');
    expect(peeked?.verdict).toMatchObject({ allowed: false, ramping: { percent: 10 } });
    expect(peeked?.circuit).toBe(admitted?.circuit); // nothing written
    expect(refused).toEqual(['svc']);
  });
});
