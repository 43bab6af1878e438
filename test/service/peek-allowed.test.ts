import { describe, expect, it } from 'vitest';
import type { BreakerObserver } from '../../src/service/breaker-observer.js';
import { BreakerService } from '../../src/service/breaker-service.js';
import { FakeClock, silentLogger } from '../helper.js';
import { everyStore } from '../store/every-store.js';

const { stores } = everyStore();
const settings = { failureThreshold: 2, timeoutSeconds: 30, halfOpenMaxCalls: 1 };

describe.each(stores)('BreakerService.peekAllowed and allowed (%s)', (_kind, makeStore) => {
  async function service() {
    const clock = new FakeClock();
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
      groupCommit: true,
      observer,
    });
    return { breaker, clock, refused };
  }

  it('answers a closed circuit at once, without a promise', async () => {
    const { breaker } = await service();
    await breaker.record('svc', { success: true });
    const peeked = breaker.peekAllowed('svc');
    expect(peeked?.verdict.allowed).toBe(true);
    expect(peeked?.circuit.name).toBe('svc');
  });

  it('refuses an open circuit at once and tells the observer, as `allowed` does', async () => {
    const { breaker, refused } = await service();
    for (let i = 0; i < 2; i++) await breaker.record('svc', { success: false });
    expect(breaker.peekAllowed('svc')?.verdict.allowed).toBe(false);
    expect((await breaker.allowed('svc'))?.verdict.allowed).toBe(false);
    expect(refused).toEqual(['svc', 'svc']);
  });

  it('leaves a probe slot to `allowed`: one probe is admitted, the next refused', async () => {
    const { breaker, clock } = await service();
    for (let i = 0; i < 2; i++) await breaker.record('svc', { success: false });
    clock.advance(30_000);
    expect(breaker.peekAllowed('svc')).toBeUndefined(); // half-opening and taking the slot is a write
    expect((await breaker.allowed('svc'))?.verdict.allowed).toBe(true);
    const second = breaker.peekAllowed('svc') ?? (await breaker.allowed('svc'));
    expect(second?.verdict.allowed).toBe(false);
    expect((await breaker.get('svc'))?.state).toBe('half_open');
  });

  it('answers null for a circuit never recorded, and creates none', async () => {
    const { breaker } = await service();
    expect(await breaker.allowed('ghost')).toBeNull();
    expect(await breaker.get('ghost')).toBeNull();
  });
});

describe('BreakerService.peekAllowed on SQLite', () => {
  it('answers null at once for a circuit never recorded', async () => {
    const store = await stores[0]![1]();
    const breaker = new BreakerService({
      store,
      clock: () => 0,
      logger: silentLogger,
      circuitDefaults: settings,
      policy: { probeLeaseMs: 10_000 },
    });
    expect(breaker.peekAllowed('ghost')).toBeNull();
  });
});
