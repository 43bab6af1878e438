import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, parseConfigText } from '../../src/config.js';
import { SendWatch, watchTheRest } from '../../src/proxy/send-timeout.js';
import type { Upstream } from '../../src/proxy/upstreams.js';

/**
 * `send_timeout_ms` (issue 27, item 7): the watch's rule on a fake stream and Vitest's fake
 * timers; the real sockets are in send-timeout-process.test.ts.
 */
const upstreamYaml = (extra = '') =>
  `local_dc: dc1\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "http://127.0.0.1:1" }]\n${extra}`;

/** A caller's stream: `writableLength` bytes wait for it. */
function stream(waiting: number) {
  return { writableLength: waiting, destroyed: false };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('SendWatch', () => {
  it('cuts a caller that takes none of the waiting bytes for the whole timeout, once', () => {
    const s = stream(100_000);
    const onTimeout = vi.fn();
    const watch = new SendWatch(s, 200, onTimeout);
    watch.stalled();
    vi.advanceTimersByTime(199);
    expect(onTimeout).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(onTimeout).toHaveBeenCalledTimes(1);
    watch.stalled();
    vi.advanceTimersByTime(1_000);
    expect(onTimeout).toHaveBeenCalledTimes(1);
  });

  it('gives a caller that took some bytes another window', () => {
    const s = stream(100_000);
    const onTimeout = vi.fn();
    new SendWatch(s, 200, onTimeout).stalled();
    vi.advanceTimersByTime(150);
    s.writableLength = 40_000; // one chunk went to the kernel
    vi.advanceTimersByTime(50 + 199);
    expect(onTimeout).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1); // a second window without progress
    expect(onTimeout).toHaveBeenCalledTimes(1);
  });

  it('stops when the caller drains, and starts afresh on the next stall', () => {
    const s = stream(100_000);
    const onTimeout = vi.fn();
    const watch = new SendWatch(s, 200, onTimeout);
    watch.stalled();
    vi.advanceTimersByTime(150);
    watch.settled();
    vi.advanceTimersByTime(1_000);
    expect(onTimeout).not.toHaveBeenCalled();
    watch.stalled();
    vi.advanceTimersByTime(200);
    expect(onTimeout).toHaveBeenCalledTimes(1);
  });

  it('does not count a caller that took everything, or one already gone', () => {
    for (const s of [stream(0), { writableLength: 100_000, destroyed: true }]) {
      const onTimeout = vi.fn();
      const watch = new SendWatch(s, 200, onTimeout);
      watch.stalled();
      s.writableLength = s.destroyed ? 100_000 : 0;
      vi.advanceTimersByTime(1_000);
      expect(onTimeout).not.toHaveBeenCalled();
    }
  });
});

describe('watchTheRest (a complete answer: fallback, coalesced copy)', () => {
  function fakeResponse(waiting: number) {
    return { writableLength: waiting, destroyed: false, destroy: vi.fn() };
  }
  const upstream = (sendTimedOut: () => void) =>
    ({ config: { send_timeout_ms: 200 }, sendTimedOut }) as unknown as Upstream;

  it('cuts and counts a caller that does not take the rest of a written answer', () => {
    const res = fakeResponse(5_000_000);
    const counted = vi.fn();
    watchTheRest(res as unknown as ServerResponse, upstream(counted));
    vi.advanceTimersByTime(200);
    expect(res.destroy).toHaveBeenCalledTimes(1);
    expect(counted).toHaveBeenCalledTimes(1);
  });

  it('leaves alone an answer the kernel took whole', () => {
    const res = fakeResponse(0);
    const counted = vi.fn();
    watchTheRest(res as unknown as ServerResponse, upstream(counted));
    vi.advanceTimersByTime(1_000);
    expect(res.destroy).not.toHaveBeenCalled();
    expect(counted).not.toHaveBeenCalled();
  });
});

describe('send_timeout_ms config key', () => {
  it('defaults to 60 s, like nginx send_timeout', () => {
    expect(parseConfigText(upstreamYaml(), 'f').upstreams.users!.send_timeout_ms).toBe(60_000);
  });

  it('takes a value from the upstream block', () => {
    const users = parseConfigText(upstreamYaml('    send_timeout_ms: 250\n'), 'f').upstreams.users!;
    expect(users.send_timeout_ms).toBe(250);
  });

  it('refuses 0, a negative, a fraction, over 10 minutes or a string, naming the key', () => {
    for (const bad of ['0', '-5', '1.5', '600001', '"60s"']) {
      const text = upstreamYaml(`    send_timeout_ms: ${bad}\n`);
      expect(() => parseConfigText(text, 'f')).toThrow(ConfigError);
      expect(() => parseConfigText(text, 'f')).toThrow(/^f upstreams\.users\.send_timeout_ms: /);
    }
  });
});
