// Issue 29, the Node client: what call() records as an outcome's kind (classify, isFailure, the
// default table over HTTP answers and errors with a status, the caller's own signal), and what the
// local breaker counts. A fake transport and a fake clock: no sockets, no sleeps.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CallTimeoutError, createClient, type ClientOptions } from '../../src/client/index.js';
import type { OutcomeItem } from '../../src/client/transport.js';
import { FakeTransport } from './fake-transport.js';

const clients: { close(): Promise<void> }[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
});

const NOW = Date.parse('2030-01-01T00:00:00Z');

async function connected(options: Partial<ClientOptions> = {}) {
  const transport = new FakeTransport();
  const client = createClient({
    url: 'http://127.0.0.1:1',
    transport,
    closeTimeoutMs: 1_000,
    flushDelayMs: 1,
    clock: () => NOW,
    ...options,
  });
  clients.push(client);
  await client.ready();
  return { transport, client };
}

/** The recorded outcomes' kind fields only (success, kind, retry_after_seconds, deadline_ms). */
async function recorded(transport: FakeTransport, count: number) {
  await vi.waitFor(() => expect(transport.outcomes).toHaveLength(count));
  return transport.outcomes.map((o: OutcomeItem) => {
    const { success, kind, retry_after_seconds, deadline_ms } = o;
    return Object.fromEntries(
      Object.entries({ success, kind, retry_after_seconds, deadline_ms }).filter(([, v]) => v !== undefined),
    );
  });
}

const answer = (status: number, headers: Record<string, string> = {}) => new Response(null, { status, headers });
const statusError = (fields: Record<string, unknown>) => Object.assign(new Error('http error'), fields);
let running: () => void = () => undefined;
/** Resolves once the next `untilAborted` call runs. */
const runs = () => new Promise<void>((resolve) => (running = resolve));
/** A function that waits until its signal aborts, then throws the abort's reason (as fetch does). */
const untilAborted = (signal: AbortSignal) => {
  running();
  return new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
};

describe('the default classification of an HTTP answer', () => {
  it('records fetch answers by the table: 2xx success, 404 and 501 rejected, 408 and 500 failure', async () => {
    const { transport, client } = await connected();
    for (const status of [200, 404, 501, 408, 500]) await client.call('svc', async () => answer(status));
    expect(await recorded(transport, 5)).toEqual([
      { success: true },
      { kind: 'rejected' },
      { kind: 'rejected' },
      { success: false },
      { success: false },
    ]);
  });

  it('records a 429 as throttled with its Retry-After seconds, and a 503 with an HTTP date by the client’s clock', async () => {
    const { transport, client } = await connected();
    await client.call('svc', async () => answer(429, { 'retry-after': '7' }));
    const in30s = new Date(NOW + 30_000).toUTCString();
    await client.call('svc', async () => answer(503, { 'retry-after': in30s }));
    await client.call('svc', async () => answer(429));
    await client.call('svc', async () => answer(503));
    expect(await recorded(transport, 4)).toEqual([
      { kind: 'throttled', retry_after_seconds: 7 },
      { kind: 'throttled', retry_after_seconds: 30 },
      { kind: 'throttled' },
      { success: false },
    ]);
  });

  it('records an error carrying a status (undici’s statusCode, status, response.status) by the same table', async () => {
    const { transport, client } = await connected();
    const thrown = [
      statusError({ statusCode: 422 }),
      statusError({ statusCode: 429, headers: { 'retry-after': '5' } }),
      statusError({ status: 502 }),
      statusError({ response: answer(429, { 'retry-after': '2' }) }),
      new Error('ECONNRESET'),
    ];
    for (const error of thrown)
      await expect(
        client.call('svc', async () => {
          throw error;
        }),
      ).rejects.toBe(error);
    expect(await recorded(transport, 5)).toEqual([
      { kind: 'rejected' },
      { kind: 'throttled', retry_after_seconds: 5 },
      { success: false },
      { kind: 'throttled', retry_after_seconds: 2 },
      { success: false },
    ]);
  });

  it('records a plain result as a success and leaves it unchanged', async () => {
    const { transport, client } = await connected();
    const value = { status: 'ok' }; // a status that is no number: not an HTTP answer
    expect(await client.call('svc', async () => value)).toBe(value);
    expect(await recorded(transport, 1)).toEqual([{ success: true }]);
  });
});

describe('the caller’s own signal', () => {
  it('records a TimeoutError abort as caller_deadline with the stated deadlineMs, and throws its reason at once', async () => {
    const { transport, client } = await connected();
    const controller = new AbortController();
    const reason = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    const started = runs();
    const pending = client.call('svc', (signal) => untilAborted(signal), { signal: controller.signal, deadlineMs: 50 });
    await started;
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(await recorded(transport, 1)).toEqual([{ kind: 'caller_deadline', deadline_ms: 50 }]);
  });

  it('takes the time the call ran as deadline_ms when no deadlineMs is stated (AbortSignal.timeout)', async () => {
    const { transport, client } = await connected();
    const error = await client
      .call('svc', (signal) => untilAborted(signal), { signal: AbortSignal.timeout(5) })
      .catch((e: unknown) => e);
    expect((error as DOMException).name).toBe('TimeoutError');
    const [outcome] = await recorded(transport, 1);
    expect(outcome).toEqual({ kind: 'caller_deadline', deadline_ms: expect.any(Number) });
    expect(Number.isInteger(outcome!.deadline_ms) && (outcome!.deadline_ms as number) >= 1).toBe(true);
  });

  it('records any other abort reason as cancelled', async () => {
    const { transport, client } = await connected();
    const controller = new AbortController();
    const started = runs();
    const pending = client.call('svc', (signal) => untilAborted(signal), { signal: controller.signal });
    await started;
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(await recorded(transport, 1)).toEqual([{ kind: 'cancelled' }]);
  });

  it('runs nothing and records nothing when the signal is already aborted', async () => {
    const { transport, client } = await connected();
    const fn = vi.fn(async () => 1);
    await expect(client.call('svc', fn, { signal: AbortSignal.abort('gone') })).rejects.toBe('gone');
    expect(fn).not.toHaveBeenCalled();
    await client.call('other', async () => 1);
    expect(await recorded(transport, 1)).toEqual([{ success: true }]);
  });

  it('records a call that ended before its signal aborted as what it returned', async () => {
    const { transport, client } = await connected();
    const controller = new AbortController();
    expect(await client.call('svc', async () => 3, { signal: controller.signal })).toBe(3);
    controller.abort(new DOMException('late', 'TimeoutError'));
    expect(await recorded(transport, 1)).toEqual([{ success: true }]);
  });

  it('keeps the client’s own timeoutMs a failure, whatever classify says', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { transport, client } = await connected();
    const pending = client
      .call('svc', (signal) => untilAborted(signal), {
        timeoutMs: 100,
        signal: new AbortController().signal,
        classify: () => 'rejected',
      })
      .catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(100);
    expect(await pending).toBeInstanceOf(CallTimeoutError);
    await vi.advanceTimersByTimeAsync(10);
    expect(transport.outcomes.map((o) => o.success)).toEqual([false]);
  });

  it('refuses a deadlineMs that is no positive number', async () => {
    const { client } = await connected();
    await expect(client.call('svc', async () => 1, { deadlineMs: 0 })).rejects.toThrow(TypeError);
  });
});

describe('classify', () => {
  it('wins over isFailure, with a kind or a kind and its detail', async () => {
    const { transport, client } = await connected();
    const isFailure = () => true;
    await client.call('svc', async () => 1, { classify: () => 'rejected', isFailure });
    await client.call('svc', async () => 2, {
      classify: () => ({ kind: 'throttled', retryAfterSeconds: 2.5 }),
      isFailure,
    });
    await client.call('svc', async () => 3, { classify: () => ({ kind: 'caller_deadline', deadlineMs: 40 }) });
    expect(await recorded(transport, 3)).toEqual([
      { kind: 'rejected' },
      { kind: 'throttled', retry_after_seconds: 3 },
      { kind: 'caller_deadline', deadline_ms: 40 },
    ]);
  });

  it('falls back to isFailure, then to the default, when it returns undefined', async () => {
    const { transport, client } = await connected();
    await client.call('svc', async () => 1, { classify: () => undefined, isFailure: () => true });
    await client.call('svc', async () => answer(404), { classify: () => undefined });
    expect(await recorded(transport, 2)).toEqual([{ success: false }, { kind: 'rejected' }]);
  });

  it('throws a TypeError for an unknown kind or misplaced detail, recording a failure', async () => {
    const { transport, client } = await connected();
    const bad = [
      () => 'nope',
      () => ({ kind: 'rejected', retryAfterSeconds: 3 }),
      () => ({ kind: 'caller_deadline', deadlineMs: -1 }),
    ];
    for (const classify of bad)
      await expect(client.call('svc', async () => 1, { classify: classify as never })).rejects.toThrow(TypeError);
    expect(await recorded(transport, 3)).toEqual([{ success: false }, { success: false }, { success: false }]);
  });
});

describe('the local breaker while circuitlog is unreachable', () => {
  it('counts rejected as a success, cancelled and short caller deadlines as nothing, a fair deadline as a failure', async () => {
    const { transport, client } = await connected({ clock: Date.now });
    transport.answers.set('svc', {
      allowed: true,
      state: 'closed',
      circuit: { state: 'closed', failure_threshold: 2, timeout_seconds: 60, min_deadline_ms: 100 },
    });
    await client.call('svc', async () => 1);
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).toBe('offline'));
    const classified = (c: unknown) => client.call('svc', async () => 1, { classify: () => c as never });
    for (let i = 0; i < 5; i++) {
      await classified('rejected');
      await classified('cancelled');
      await classified({ kind: 'caller_deadline', deadlineMs: 50 });
      await classified('throttled');
    }
    expect(client.state('svc')).toBe('closed');
    await classified({ kind: 'caller_deadline', deadlineMs: 100 });
    await classified({ kind: 'caller_deadline', deadlineMs: 100 });
    expect(client.state('svc')).toBe('open');
  });

  it('follows the circuit’s count_as overrides', async () => {
    const { transport, client } = await connected({ clock: Date.now });
    transport.answers.set('svc', {
      allowed: true,
      state: 'closed',
      circuit: { state: 'closed', failure_threshold: 2, timeout_seconds: 60, count_as: { rejected: 'failure' } },
    });
    await client.call('svc', async () => 1);
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).toBe('offline'));
    for (let i = 0; i < 2; i++) await client.call('svc', async () => answer(404));
    expect(client.state('svc')).toBe('open');
  });
});
