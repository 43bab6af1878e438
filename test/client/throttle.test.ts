import { afterEach, describe, expect, it, vi } from 'vitest';
import { CircuitOpenError, CircuitThrottledError, createClient, type ClientOptions } from '../../src/client/index.js';
import { LocalThrottles, throttleFromJson } from '../../src/client/local-throttle.js';
import { TransportError } from '../../src/client/transport.js';
import { FakeTransport } from './fake-transport.js';

const clients: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
});

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

const throttledCircuit = (throttle: unknown = { k: 2, window_seconds: 10 }) => ({
  name: 'dep',
  state: 'closed' as const,
  forced_state: null as string | null,
  throttle,
});

/** A connected client whose first snapshot of `dep` carries `throttle`; clock and random injected. */
async function connected(options: Partial<ClientOptions> & { throttle?: unknown } = {}) {
  const transport = new FakeTransport();
  transport.answers.set('dep', { allowed: true, state: 'closed', circuit: throttledCircuit(options.throttle) });
  const client = createClient({ url: 'http://127.0.0.1:1', transport, closeTimeoutMs: 1_000, ...options });
  clients.push(client);
  await client.ready();
  return { transport, client };
}

const succeed = async () => 'ok';
const fail = async (): Promise<never> => {
  throw new Error('boom');
};

/** `n` calls on dep, the first `successes` of them succeeding (errors swallowed). */
async function calls(client: ReturnType<typeof createClient>, n: number, successes: number) {
  for (let i = 0; i < n; i++) await client.call('dep', i < successes ? succeed : fail).catch(() => undefined);
}

describe('soft throttling in the client', () => {
  it('reads throttle from a circuit’s JSON leniently, defaults for bad members, null when absent', () => {
    expect(throttleFromJson({ throttle: { k: 3, window_seconds: 20 } })).toEqual({ k: 3, windowSeconds: 20 });
    expect(throttleFromJson({ throttle: { k: 0.1, window_seconds: 'x' } })).toEqual({ k: 2, windowSeconds: 60 });
    expect(throttleFromJson({ throttle: null })).toBeNull();
    expect(throttleFromJson({})).toBeNull();
    expect(throttleFromJson(null)).toBeNull();
  });

  it('refuses locally with CircuitThrottledError, without a request and without running the call', async () => {
    let draw = 0.999; // admit while the history is made
    const { transport, client } = await connected({ random: () => draw, clock: () => 1_000_000 });
    await calls(client, 10, 3); // the first one snapshots; p = (10 - 2*3) / 11 after them
    draw = 0.1;
    const fn = vi.fn(succeed);
    const error = await client.call('dep', fn).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CircuitThrottledError);
    expect(error).toBeInstanceOf(CircuitOpenError);
    expect(error).toMatchObject({ code: 'CIRCUIT_THROTTLED', state: 'closed', local: true, probability: 4 / 11 });
    expect(fn).not.toHaveBeenCalled();
    expect(transport.allowedCalls).toEqual(['dep']);
    expect(client.stats().throttledLocally).toBe(1);
    expect(client.state('dep')).toBe('closed');
    draw = 5 / 12; // at p (the refusal counted: (11 - 2*3) / 12): admitted
    expect(await client.call('dep', succeed)).toBe('ok');
  });

  it('answers the fallback for a throttled call, and allowed() says false', async () => {
    const { client } = await connected({ random: () => 0.1, clock: () => 1_000_000 });
    await calls(client, 10, 3);
    expect(
      await client.call('dep', succeed, {
        fallback: (e) => (e instanceof CircuitThrottledError ? 'fallback' : 'other'),
      }),
    ).toBe('fallback');
    expect(await client.allowed('dep')).toBe(false);
  });

  it('never throttles a healthy dependency, and never a circuit forced closed', async () => {
    const { client } = await connected({ random: () => 0 });
    await calls(client, 50, 50);
    expect(client.stats().throttledLocally).toBe(0);
    const forced = await connected({ random: () => 0 });
    forced.transport.answers.set('dep', {
      allowed: true,
      state: 'closed',
      circuit: { ...throttledCircuit(), forced_state: 'closed' },
    });
    await calls(forced.client, 20, 0);
    expect(forced.client.stats().throttledLocally).toBe(0);
  });

  it('starts its counts empty when a stream event says the circuit changed state', async () => {
    const { transport, client } = await connected({ random: () => 0.1, clock: () => 1_000_000 });
    await calls(client, 10, 0);
    transport.stream!.emit({
      circuit: 'dep',
      from: 'closed',
      to: 'open',
      reason: 'failure_threshold_reached',
      at: 'x',
    });
    transport.stream!.emit({ circuit: 'dep', from: 'open', to: 'closed', reason: 'manual_reset', at: 'x' });
    transport.answers.set('dep', { allowed: true, state: 'closed', circuit: throttledCircuit() });
    expect(await client.call('dep', succeed)).toBe('ok'); // p = 0 again
  });

  it('turns circuitlog’s 503 circuit-throttled into CircuitThrottledError and keeps no refusal', async () => {
    const transport = new FakeTransport();
    transport.openStream = () => Promise.reject(new TransportError('rejected', 'too many streams', 503));
    const client = createClient({ url: 'http://x', transport, closeTimeoutMs: 100 });
    clients.push(client);
    transport.answers.set('dep', {
      allowed: false,
      state: 'closed',
      retryAt: Date.now() + 1_000,
      retryAfterMs: 1_000,
      forced: false,
      throttled: { probability: 0.5 },
    });
    const error = await client.call('dep', succeed).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CIRCUIT_THROTTLED', probability: 0.5, local: false });
    transport.answers.delete('dep');
    expect(await client.call('dep', succeed)).toBe('ok'); // asked again at once: a throttle refusal is per call
    expect(transport.allowedCalls).toEqual(['dep', 'dep']);
    expect(client.connection).toBe('syncing'); // a throttled answer is no outage
  });

  it('keeps counts for at most maxCircuits circuits, the least recently used dropped first', () => {
    const throttles = new LocalThrottles(
      () => 0,
      () => 0,
      2,
    );
    const json = { throttle: { k: 2, window_seconds: 10 } };
    for (const name of ['a', 'b', 'c']) throttles.record(name, json, false);
    expect(throttles.decide('a', json)).toEqual({ throttled: false, probability: 0 }); // 'a' was dropped
    expect(throttles.decide('c', json)).toEqual({ throttled: true, probability: 1 / 2 });
  });

  it('a dependency that starts failing 60% of calls sees its call rate fall as the formula says, decided locally, the circuit still closed', async () => {
    let now = Date.parse('2026-11-30T03:30:00.000Z');
    const window = 10; // s
    const { transport, client } = await connected({
      random: seeded(21),
      clock: () => now,
      throttle: { k: 2, window_seconds: window },
    });
    const dependency = seeded(7);
    const perSecond = 40;
    const healthySeconds = window;
    const failingSeconds = 3 * window;
    const ledger: { at: number; accepted: boolean }[] = [];
    const formula = (at: number) => {
      const first = Math.floor(at / 1000) - window + 1;
      const live = ledger.filter((r) => Math.floor(r.at / 1000) >= first);
      const accepts = live.filter((r) => r.accepted).length;
      return Math.max(0, (live.length - 2 * accepts) / (live.length + 1));
    };
    const slices: { admitted: number; attempts: number; expected: number }[] = [];
    let refused = 0;
    for (let s = 0; s < healthySeconds + failingSeconds; s++) {
      const failing = s >= healthySeconds;
      if (failing && (s - healthySeconds) % 5 === 0) slices.push({ admitted: 0, attempts: 0, expected: 0 });
      for (let i = 0; i < perSecond; i++) {
        const p = formula(now);
        let ran = false;
        let success = true;
        const error = await client
          .call('dep', async () => {
            ran = true;
            success = !failing || dependency() >= 0.6;
            if (!success) throw new Error('dependency failed');
            return 'ok';
          })
          .catch((e: unknown) => e);
        if (!ran) {
          expect(error).toBeInstanceOf(CircuitThrottledError);
          refused++;
        }
        ledger.push({ at: now, accepted: ran && success });
        if (failing) {
          const slice = slices.at(-1)!;
          slice.attempts++;
          slice.expected += 1 - p;
          if (ran) slice.admitted++;
        } else {
          expect(ran).toBe(true);
        }
        now += 1000 / perSecond;
      }
    }
    const shares = slices.map((x) => ({ admitted: x.admitted / x.attempts, formula: x.expected / x.attempts }));
    for (const share of shares)
      expect(Math.abs(share.admitted - share.formula), JSON.stringify(shares)).toBeLessThanOrEqual(0.1);
    expect(shares[0]!.admitted).toBeGreaterThan(0.9);
    expect(shares.at(-1)!.admitted).toBeLessThan(0.5);
    expect(transport.allowedCalls).toEqual(['dep']); // one snapshot: every other decision was local
    expect(client.state('dep')).toBe('closed');
    expect(client.stats().throttledLocally).toBe(refused);
  });
});
