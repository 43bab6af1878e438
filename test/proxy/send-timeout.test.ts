import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ConfigError, parseConfigText } from '../../src/config.js';
import { SendWatch, sendWhole } from '../../src/proxy/send-timeout.js';
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

describe('sendWhole (a complete answer: fallback, coalesced copy)', () => {
  /** A caller's response whose socket takes nothing until `take()`; every write over 0 bytes fills it. */
  function fakeResponse() {
    const res = {
      writableLength: 0,
      destroyed: false,
      written: [] as number[],
      ended: false,
      drain: null as (() => void) | null,
      write(chunk: Buffer) {
        res.written.push(chunk.length);
        res.writableLength += chunk.length;
        return false;
      },
      end(chunk?: Buffer) {
        if (chunk !== undefined) res.write(chunk);
        res.ended = true;
        return res;
      },
      once(_event: 'drain', fn: () => void) {
        res.drain = fn;
        return res;
      },
      destroy: vi.fn(() => {
        res.destroyed = true;
      }),
      /** The caller reads everything waiting: 'drain'. */
      take() {
        res.writableLength = 0;
        const drain = res.drain;
        res.drain = null;
        drain?.();
      },
    };
    return res;
  }
  const upstream = (sendTimedOut: () => void) =>
    ({ config: { send_timeout_ms: 200 }, sendTimedOut }) as unknown as Upstream;
  const send = (res: ReturnType<typeof fakeResponse>, body: Buffer | null, counted: () => void) =>
    sendWhole(res as unknown as ServerResponse, body, upstream(counted));

  it('writes a large body in 64 KiB slices, each after the caller took the last, and never cuts a caller that keeps taking them', () => {
    const res = fakeResponse();
    const counted = vi.fn();
    send(res, Buffer.alloc(200 * 1024), counted);
    for (let i = 0; i < 3; i++) {
      vi.advanceTimersByTime(150); // under send_timeout_ms each time, 450 ms in all
      res.take();
    }
    expect(res.written).toEqual([65_536, 65_536, 65_536, 8_192]);
    expect(res.ended).toBe(true);
    res.take();
    vi.advanceTimersByTime(1_000);
    expect(counted).not.toHaveBeenCalled();
    expect(res.destroy).not.toHaveBeenCalled();
  });

  it('cuts and counts a caller that stops taking the slices', () => {
    const res = fakeResponse();
    const counted = vi.fn();
    send(res, Buffer.alloc(200 * 1024), counted);
    res.take();
    vi.advanceTimersByTime(200);
    expect(res.destroy).toHaveBeenCalledTimes(1);
    expect(counted).toHaveBeenCalledTimes(1);
    expect(res.written).toEqual([65_536, 65_536]);
  });

  it('cuts a caller that does not take the last bytes of a small answer, and leaves alone one the kernel took whole', () => {
    const deaf = fakeResponse();
    const counted = vi.fn();
    send(deaf, Buffer.alloc(1_000), counted);
    expect(deaf.ended).toBe(true);
    vi.advanceTimersByTime(200);
    expect(counted).toHaveBeenCalledTimes(1);
    const empty = fakeResponse();
    send(empty, null, counted);
    vi.advanceTimersByTime(1_000);
    expect(empty.ended).toBe(true);
    expect(empty.destroy).not.toHaveBeenCalled();
    expect(counted).toHaveBeenCalledTimes(1);
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
