import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config.js';
import { BreakerService } from '../../src/service/breaker-service.js';
import { PANIC_RECHECK_MS, PanicWatch, pickInPanic } from '../../src/proxy/node-picker.js';
import { buildUpstreams, ensureNodeCircuits } from '../../src/proxy/upstreams.js';
import { FakeClock, memoryStore, silentLogger } from '../helper.js';

function fixture(threshold = 50) {
  const clock = new FakeClock();
  const { store } = memoryStore();
  const breaker = new BreakerService({
    store,
    clock: clock.now,
    logger: silentLogger,
    circuitDefaults: { failureThreshold: 1, timeoutSeconds: 30, halfOpenMaxCalls: 1 },
    policy: { probeLeaseMs: 10_000 },
    groupCommit: false,
  });
  const yaml = `local_dc: dc1
upstreams:
  users:
    failure_threshold: 1
    panic_threshold_percent: ${threshold}
    nodes:
      - { id: a, dc: dc1, url: "http://127.0.0.1:1" }
      - { id: b, dc: dc1, url: "http://127.0.0.1:2" }
      - { id: c, dc: dc2, url: "http://127.0.0.1:3" }
      - { id: d, dc: dc2, url: "http://127.0.0.1:4" }
`;
  const config = parseConfigText(yaml, 'test');
  const upstream = buildUpstreams(config.upstreams, 'dc1').get('users')!;
  ensureNodeCircuits(store, [upstream], clock.now());
  const changes: [boolean, number][] = [];
  const watch = new PanicWatch(upstream, breaker, clock.now, (_u, panic, available) =>
    changes.push([panic, available]),
  );
  const open = (...ids: string[]) =>
    ids.forEach(
      (id) =>
        void breaker.record(
          `users/${id}`,
          { success: false, caller: upstream.recordOptions.caller },
          upstream.recordOptions,
        ),
    ); // SQLite: written at once
  return { clock, breaker, upstream, watch, changes, open };
}

const ids = (picks: ({ node: { id: string } | null } | null)[]) => picks.map((p) => p?.node?.id ?? null);

describe('PanicWatch', () => {
  it('holds once fewer than the threshold share of nodes are available, and tells the listener once', () => {
    const { watch, changes, open, clock } = fixture(50);
    expect(watch.holds()).toBe(false);
    open('a', 'b');
    clock.advance(PANIC_RECHECK_MS);
    expect(watch.holds()).toBe(false); // 2 of 4 available: not fewer than 50 %
    open('c');
    clock.advance(PANIC_RECHECK_MS);
    expect(watch.holds()).toBe(true);
    expect(watch.holds()).toBe(true);
    expect(changes).toEqual([[true, 1]]);
  });

  it('reads the nodes again only after PANIC_RECHECK_MS, or at once once told a node refused', () => {
    const { watch, open, clock } = fixture(50);
    expect(watch.holds()).toBe(false);
    open('a', 'b', 'c');
    clock.advance(PANIC_RECHECK_MS - 1);
    expect(watch.holds()).toBe(false); // the last reading still stands
    watch.stale();
    expect(watch.holds()).toBe(true);
  });

  it('ends when nodes come back, counting a half-open node with a free probe as available', () => {
    const { watch, changes, open, clock } = fixture(50);
    open('a', 'b', 'c', 'd');
    expect(watch.holds()).toBe(true);
    clock.advance(30_000); // every open time over: half-open, probes free
    expect(watch.holds()).toBe(false);
    expect(changes).toEqual([
      [true, 0],
      [false, 4],
    ]);
  });

  it('never holds with panic_threshold_percent 0', () => {
    const { watch, open } = fixture(0);
    open('a', 'b', 'c', 'd');
    expect(watch.holds()).toBe(false);
  });
});

describe('pickInPanic', () => {
  it('spreads over every local node, open or not, before any other DC', async () => {
    const { upstream, breaker, open } = fixture();
    open('a', 'b', 'c', 'd');
    const picks = [];
    for (let i = 0; i < 4; i++) picks.push(await pickInPanic(upstream, breaker, null));
    expect(ids(picks)).toEqual(['a', 'b', 'a', 'b']);
  });

  it('moves to the other DC once every local node was tried, and answers null when all were', async () => {
    const { upstream, breaker } = fixture();
    const [a, b, c, d] = upstream.nodes;
    const pick = (tried: Set<unknown>) => pickInPanic(upstream, breaker, tried as never);
    expect((await pick(new Set([a, b])))?.node?.id).toMatch(/^[cd]$/);
    expect(await pick(new Set([a, b, c, d]))).toBeNull();
  });

  it('judges a node whose breaker admits the call, and not one used against its breaker', async () => {
    const { upstream, breaker, open } = fixture();
    open('a');
    const first = (await pickInPanic(upstream, breaker, null)) as { node: { id: string }; use: { judged: boolean } };
    const second = (await pickInPanic(upstream, breaker, null)) as { node: { id: string }; use: { judged: boolean } };
    expect([first, second].map((p) => [p.node.id, p.use.judged])).toEqual([
      ['a', false],
      ['b', true],
    ]);
  });
});
