import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CallTimeoutError,
  CircuitOpenError,
  CircuitlogRequestError,
  CircuitlogUnavailableError,
  ClientClosedError,
  createClient,
  type ClientOptions,
} from '../../src/client/index.js';
import { TransportError } from '../../src/client/transport.js';
import { FakeTransport, open } from './fake-transport.js';

const clients: { close(): Promise<void> }[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
});

/** A client on a fake transport, with its stream open. */
async function connected(options: Partial<ClientOptions> = {}) {
  const transport = new FakeTransport();
  const client = createClient({ url: 'http://127.0.0.1:1', transport, closeTimeoutMs: 1_000, ...options });
  clients.push(client);
  await client.ready();
  return { transport, client };
}

const fail = (): never => {
  throw new Error('boom');
};

describe('decisions', () => {
  it('decides locally on a circuit its view shows closed, after one snapshot', async () => {
    const { transport, client } = await connected();
    for (let i = 0; i < 10; i++) expect(await client.call('svc', async () => i)).toBe(i);
    expect(transport.allowedCalls).toEqual(['svc']);
    expect(client.stats()).toMatchObject({ localDecisions: 9, serverChecks: 1 });
  });

  it('asks circuitlog for every call while the stream is not open', async () => {
    const transport = new FakeTransport();
    transport.openStream = () => Promise.reject(new TransportError('rejected', 'too many streams', 503));
    const client = createClient({ url: 'http://x', transport, closeTimeoutMs: 100 });
    clients.push(client);
    for (let i = 0; i < 3; i++) await client.call('svc', async () => i);
    expect(client.connection).toBe('syncing');
    expect(transport.allowedCalls).toEqual(['svc', 'svc', 'svc']);
    expect(client.stats().localDecisions).toBe(0);
  });

  it('asks circuitlog once the stream says the circuit opened, and refuses with its retry time', async () => {
    const { transport, client } = await connected();
    await client.call('svc', async () => 1);
    transport.answers.set('svc', open(Date.parse('2030-01-01T00:00:00Z')));
    transport.stream!.emit({
      circuit: 'svc',
      from: 'closed',
      to: 'open',
      reason: 'failure_threshold_reached',
      at: 'x',
    });
    const fn = vi.fn(async () => 1);
    const error = await client.call('svc', fn).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CircuitOpenError);
    expect((error as CircuitOpenError).retryAt.toISOString()).toBe('2030-01-01T00:00:00.000Z');
    expect(fn).not.toHaveBeenCalled();
    expect(client.state('svc')).toBe('open');
  });

  it('keeps a refusal until its retry time without asking again, and drops it on the next event', async () => {
    const { transport, client } = await connected();
    transport.answers.set('svc', open(Date.now() + 60_000));
    await expect(client.call('svc', async () => 1)).rejects.toBeInstanceOf(CircuitOpenError);
    await expect(client.call('svc', async () => 1)).rejects.toBeInstanceOf(CircuitOpenError);
    expect(transport.allowedCalls).toHaveLength(1);
    transport.answers.delete('svc');
    transport.stream!.emit({ circuit: 'svc', from: 'open', to: 'closed', reason: 'manual_reset', at: 'x' });
    expect(await client.call('svc', async () => 2)).toBe(2);
  });

  it('keeps a refusal no longer than Retry-After by its own clock, whatever the server’s open_until says', async () => {
    let now = 1_000_000;
    const { transport, client } = await connected({ clock: () => now });
    // The server's clock runs 60 s ahead: open_until is far in this host's future.
    transport.answers.set('svc', {
      allowed: false,
      state: 'open',
      retryAt: now + 61_000,
      retryAfterMs: 1_000,
      forced: false,
    });
    await expect(client.call('svc', async () => 1)).rejects.toBeInstanceOf(CircuitOpenError);
    now += 1_000;
    transport.answers.delete('svc');
    expect(await client.call('svc', async () => 2)).toBe(2);
    expect(transport.allowedCalls).toEqual(['svc', 'svc']);
  });

  it('asks circuitlog for a circuit forced open, whatever its counted state', async () => {
    const { transport, client } = await connected();
    await client.call('svc', async () => 1);
    transport.answers.set('svc', {
      allowed: false,
      state: 'closed',
      retryAt: Date.now() + 1000,
      retryAfterMs: 1000,
      forced: true,
    });
    transport.stream!.emit({ circuit: 'svc', from: 'closed', to: 'closed', reason: 'forced_open', at: 'x' });
    const error = await client.call('svc', async () => 1).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CIRCUIT_FORCED_OPEN' });
    expect(client.state('svc')).toBe('open');
  });

  it('throws a 4xx from circuitlog (a wrong token) even with a fallback: a configuration error', async () => {
    const { transport, client } = await connected();
    transport.allowed = () =>
      Promise.reject(new TransportError('rejected', 'unauthorized', 401, { code: 'UNAUTHORIZED', detail: 'no token' }));
    const error = await client.call('svc', async () => 1, { fallback: () => 'cached' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CircuitlogRequestError);
    expect(error).toMatchObject({ status: 401, code: 'CIRCUITLOG_REJECTED' });
    expect(client.connection).toBe('connected');
  });

  it('rejects a bad circuit name before anything is queued', async () => {
    const { transport, client } = await connected();
    await expect(client.call('a//b', async () => 1)).rejects.toThrow(TypeError);
    await expect(client.record('', { success: true })).rejects.toThrow(TypeError);
    expect(transport.allowedCalls).toEqual([]);
  });

  it('answers allowed() like call() decides, without running anything', async () => {
    const { transport, client } = await connected();
    expect(await client.allowed('a')).toBe(true);
    transport.answers.set('b', open(Date.now() + 1000));
    expect(await client.allowed('b')).toBe(false);
  });
});

describe('calls', () => {
  it('sends when each call ended (at, by its clock) with every outcome', async () => {
    let now = Date.parse('2026-11-30T03:30:00.000Z');
    const { transport, client } = await connected({ clock: () => now });
    await client.call('svc', async () => (now += 40));
    await client.record('svc', { success: false });
    await client.close();
    expect(transport.outcomes.map((o) => o.at)).toEqual(['2026-11-30T03:30:00.040Z', '2026-11-30T03:30:00.040Z']);
  });

  it('rethrows fn’s own error unchanged and records a failure', async () => {
    const { transport, client } = await connected();
    const error = new Error('mine');
    await expect(client.call('svc', () => Promise.reject(error))).rejects.toBe(error);
    await client.close();
    expect(transport.outcomes).toEqual([
      {
        circuit: 'svc',
        success: false,
        duration_ms: expect.any(Number),
        at: expect.any(String),
        caller: client.caller,
      },
    ]);
  });

  it('uses the fallback when the call is refused, throws, or times out', async () => {
    const { transport, client } = await connected();
    transport.answers.set('shut', open(Date.now() + 1000));
    expect(await client.call('shut', async () => 1, { fallback: (e) => (e as Error).name })).toBe('CircuitOpenError');
    expect(await client.call('svc', fail, { fallback: (e) => (e as Error).message })).toBe('boom');
    const slow = (signal: AbortSignal) =>
      new Promise<number>((resolve) => signal.addEventListener('abort', () => resolve(1)));
    expect(await client.call('svc', slow, { timeoutMs: 5, fallback: (e) => (e as Error).name })).toBe(
      'CallTimeoutError',
    );
  });

  it('lets isFailure decide only what is recorded', async () => {
    const { transport, client } = await connected();
    expect(await client.call('svc', async () => 500, { isFailure: (_e, status) => status === 500 })).toBe(500);
    const notFound = new Error('404');
    await expect(client.call('svc', () => Promise.reject(notFound), { isFailure: () => false })).rejects.toBe(notFound);
    await client.close();
    expect(transport.outcomes.map((o) => o.success)).toEqual([false, true]);
  });

  it('aborts a timed-out call’s signal, records it once as a failure and ignores its late finish', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { transport, client } = await connected({ flushDelayMs: 1 });
    let signal: AbortSignal | undefined;
    let finish!: (v: number) => void;
    const pending = client.call(
      'svc',
      (s) => {
        signal = s;
        return new Promise<number>((resolve) => (finish = resolve));
      },
      { timeoutMs: 2_000 },
    );
    const outcome = pending.catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(2_000);
    const error = await outcome;
    expect(error).toBeInstanceOf(CallTimeoutError);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBe(error);
    finish(1);
    await vi.advanceTimersByTimeAsync(10);
    expect(transport.outcomes).toEqual([
      {
        circuit: 'svc',
        success: false,
        duration_ms: expect.any(Number),
        at: expect.any(String),
        caller: client.caller,
      },
    ]);
  });

  it('gives fn a signal that never aborts when no timeout is set', async () => {
    const { client } = await connected();
    expect(await client.call('svc', async (signal) => signal.aborted)).toBe(false);
  });
});

describe('outcomes', () => {
  it('sends outcomes in batches of at most maxBatch, in the order recorded', async () => {
    const { transport, client } = await connected({ maxBatch: 100 });
    await Promise.all(
      Array.from({ length: 250 }, (_, i) => client.record(`c${i % 3}`, { success: i % 2 === 0, durationMs: i })),
    );
    await client.close();
    expect(transport.batches.every((b) => b.length <= 100)).toBe(true);
    expect(transport.outcomes.map((o) => o.duration_ms)).toEqual(Array.from({ length: 250 }, (_, i) => i));
  });

  it('makes calls wait while the queue is full, and drops nothing', async () => {
    const { transport, client } = await connected({ maxQueuedOutcomes: 10, maxBatch: 10 });
    let release!: () => void;
    transport.holdPosts = new Promise<void>((resolve) => (release = resolve));
    for (let i = 0; i < 30; i++) await client.record('svc', { success: true }); // 2 batches of 10 in flight, 10 queued
    let ran = false;
    const waiting = client.call('svc', async () => (ran = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(ran).toBe(false);
    release();
    await waiting;
    expect(ran).toBe(true);
    await client.close();
    expect(transport.outcomes).toHaveLength(31);
    expect(client.stats().outcomesDropped).toBe(0);
  });

  it('lets calls waiting for room go on when circuitlog becomes unreachable', async () => {
    const { transport, client } = await connected({ maxQueuedOutcomes: 10, maxBatch: 10 });
    let release!: () => void;
    transport.holdPosts = new Promise<void>((resolve) => (release = resolve));
    for (let i = 0; i < 30; i++) await client.record('svc', { success: true });
    const waiting = client.call('svc', async () => 'went on');
    transport.down = true;
    release(); // the batch in flight fails: circuitlog is unreachable
    expect(await waiting).toBe('went on');
    expect(client.connection).toBe('offline');
  });

  it('retries a batch circuitlog could not take, without losing or repeating it', async () => {
    const { transport, client } = await connected();
    transport.postError = new TransportError('unreachable', 'storage busy', 503);
    await client.record('svc', { success: false });
    await vi.waitFor(() => expect(client.connection).toBe('offline'));
    transport.postError = null;
    await client.close();
    expect(transport.outcomes).toHaveLength(1);
  });

  it('keeps two batches in flight, and retries a failed one without losing or repeating any outcome', async () => {
    const { transport, client } = await connected({ maxBatch: 10 });
    let calls = 0;
    let inFlight = 0;
    let most = 0;
    const post = transport.postOutcomes.bind(transport);
    transport.postOutcomes = async (batch) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await new Promise((r) => setTimeout(r, 5));
      inFlight--;
      if (++calls === 1) throw new TransportError('unreachable', 'reset');
      return post(batch);
    };
    for (let i = 0; i < 40; i++) await client.record('svc', { success: true, durationMs: i });
    await client.close();
    expect(most).toBe(2);
    expect(transport.outcomes.map((o) => o.duration_ms).sort((a, b) => a! - b!)).toEqual(
      Array.from({ length: 40 }, (_, i) => i),
    );
  });

  it('drops and counts a batch circuitlog rejects with a 4xx', async () => {
    const { transport, client } = await connected();
    const rejected = vi.fn();
    client.on('rejected', rejected);
    transport.postError = new TransportError('rejected', 'bad', 422);
    await client.record('svc', { success: true });
    await client.close();
    expect(rejected).toHaveBeenCalledWith(expect.objectContaining({ count: 1 }));
    expect(client.stats().outcomesRejected).toBe(1);
  });

  it('on a 507 too-many-circuits drops and counts the refused circuits’ items and sends the rest at once, staying connected', async () => {
    const { transport, client } = await connected({ flushDelayMs: 20 });
    const rejected = vi.fn();
    client.on('rejected', rejected);
    const tries: string[][] = [];
    const post = transport.postOutcomes.bind(transport);
    transport.postOutcomes = async (batch) => {
      tries.push(batch.map((o) => o.circuit));
      const refused = [...new Set(batch.map((o) => o.circuit).filter((c) => c.startsWith('new-')))];
      if (refused.length > 0) throw new TransportError('unreachable', 'full', 507, { refused_circuits: refused });
      return post(batch);
    };
    for (const circuit of ['old', 'new-1', 'old', 'new-2', 'new-1', 'old'])
      await client.record(circuit, { success: false });
    await client.close();
    expect(tries).toEqual([
      ['old', 'new-1', 'old', 'new-2', 'new-1', 'old'],
      ['old', 'old', 'old'],
    ]);
    expect(transport.outcomes.map((o) => o.circuit)).toEqual(['old', 'old', 'old']);
    expect(client.stats()).toMatchObject({ outcomesRejected: 3, outcomesAcknowledged: 3, outcomesPending: 0 });
    expect(rejected).toHaveBeenCalledWith(expect.objectContaining({ count: 3 }));
    expect(client.connection).toBe('connected');
  });

  it('drops a batch whose 507 names none of its circuits: an answer that cannot succeed is not retried', async () => {
    const { transport, client } = await connected();
    let tries = 0;
    transport.postOutcomes = async () => {
      tries++;
      throw new TransportError('unreachable', 'full', 507, { code: 'TOO_MANY_CIRCUITS' });
    };
    await client.record('svc', { success: true });
    await client.record('svc', { success: false });
    await client.close();
    expect(tries).toBe(1);
    expect(client.stats()).toMatchObject({ outcomesRejected: 2, outcomesPending: 0 });
  });

  it('close() waits for running calls and resolves once every outcome is acknowledged', async () => {
    const { transport, client } = await connected({ flushDelayMs: 50 });
    let finish!: () => void;
    const running = client.call('svc', () => new Promise<void>((resolve) => (finish = resolve)));
    const closed = client.close();
    await expect(client.call('svc', async () => 1)).rejects.toThrow(/closed/);
    finish();
    await running;
    await closed;
    expect(transport.outcomes).toHaveLength(1);
    expect(transport.closed).toBe(true);
  });

  it('throws ClientClosedError (code CLIENT_CLOSED) from call(), allowed() and record() after close()', async () => {
    const { client } = await connected();
    await client.close();
    const fallback = vi.fn(async () => 'fallback');
    for (const attempt of [
      () => client.call('svc', async () => 1, { fallback }),
      () => client.allowed('svc'),
      () => client.record('svc', { success: true }),
    ]) {
      const error = await attempt().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ClientClosedError);
      expect(error).toMatchObject({ code: 'CLIENT_CLOSED', name: 'ClientClosedError' });
    }
    expect(fallback).not.toHaveBeenCalled();
  });

  it('close() rejects, naming what was not delivered, when circuitlog stays unreachable', async () => {
    const { transport, client } = await connected({ closeTimeoutMs: 50 });
    transport.goDown();
    await client.record('svc', { success: true });
    await expect(client.close()).rejects.toThrow(/1 outcome\(s\) not acknowledged/);
  });
});

describe('when circuitlog is unreachable', () => {
  it('fails open behind a local breaker with the circuit’s last known policy', async () => {
    const { transport, client } = await connected();
    transport.answers.set('svc', {
      allowed: true,
      state: 'closed',
      circuit: { state: 'closed', failure_threshold: 3, timeout_seconds: 60 },
    });
    await client.call('svc', async () => 1);
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).not.toBe('connected'));
    for (let i = 0; i < 3; i++) await expect(client.call('svc', fail)).rejects.toThrow('boom');
    const fn = vi.fn(async () => 1);
    const error = await client.call('svc', fn).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'CIRCUIT_OPEN', local: true });
    expect(fn).not.toHaveBeenCalled();
    expect(client.state('svc')).toBe('open');
    expect(await client.call('other', async () => 'still works')).toBe('still works');
  });

  it('learns a circuit’s policy off the call path once circuitlog has created it', async () => {
    let now = 1_000_000;
    const { transport, client } = await connected({ clock: () => now });
    await client.call('svc', async () => 1); // unknown to circuitlog: no policy yet
    await client.call('svc', async () => 1);
    expect(transport.circuitCalls).toEqual([]);
    transport.circuits.set('svc', { state: 'closed', failure_threshold: 2 });
    now += 1_000;
    await client.call('svc', async () => 1);
    expect(transport.circuitCalls).toEqual(['svc']);
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).toBe('offline'));
    for (let i = 0; i < 2; i++) await expect(client.call('svc', fail)).rejects.toThrow('boom');
    await expect(client.call('svc', async () => 1)).rejects.toMatchObject({ local: true });
  });

  it('refuses with CircuitlogUnavailableError when failOpen is false', async () => {
    const { transport, client } = await connected({ failOpen: false });
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).not.toBe('connected'));
    await expect(client.call('svc', async () => 1)).rejects.toBeInstanceOf(CircuitlogUnavailableError);
    expect(await client.call('svc', async () => 1, { fallback: () => 'cached' })).toBe('cached');
  });

  it('keeps at most maxQueuedOutcomes, dropping the oldest and counting them', async () => {
    const { transport, client } = await connected({ maxQueuedOutcomes: 3 });
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).not.toBe('connected'));
    for (let i = 0; i < 5; i++) await client.call('svc', async () => i).catch(() => undefined);
    expect(client.stats()).toMatchObject({ outcomesDropped: 2, outcomesPending: 3 });
    transport.up();
    await client.close();
    expect(transport.outcomes).toHaveLength(3);
  });

  it('resumes the stream with Last-Event-ID, and the server’s state wins over the local breaker', async () => {
    const { transport, client } = await connected({ localDefaults: { failureThreshold: 1 } });
    transport.stream!.emit({
      circuit: 'other',
      from: 'closed',
      to: 'open',
      reason: 'failure_threshold_reached',
      at: 'x',
    });
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).toBe('offline'));
    await expect(client.call('svc', fail)).rejects.toThrow('boom');
    expect(client.state('svc')).toBe('open'); // cut off locally
    transport.up();
    client['stream'].retryNow(); // skip the backoff wait
    await client.ready();
    expect(transport.streamOpens.at(-1)).toBe('1');
    expect(client.state('svc')).not.toBe('open'); // the local breaker is gone
    expect(await client.call('svc', async () => 'through')).toBe('through');
    expect(client.state('svc')).toBe('closed'); // what circuitlog answered
  });
});

describe('the local view bound (maxCircuits)', () => {
  it('keeps at most maxCircuits circuits, dropping the least recently used', async () => {
    const { transport, client } = await connected({ maxCircuits: 2 });
    for (const name of ['a', 'b', 'a', 'c']) await client.call(name, async () => 1); // c pushes out b, not a (used after b)
    expect(transport.allowedCalls).toEqual(['a', 'b', 'c']);
    await client.call('a', async () => 1); // still in the view: decided locally
    expect(transport.allowedCalls).toEqual(['a', 'b', 'c']);
    await client.call('b', async () => 1); // dropped: a fresh snapshot
    expect(transport.allowedCalls).toEqual(['a', 'b', 'c', 'b']);
  });

  it('stays at 10,000 circuits by default however many names are used', async () => {
    const { transport, client } = await connected();
    for (let i = 0; i < 10_050; i++) await client.call(`dyn-${i}`, async () => i);
    transport.allowedCalls.length = 0;
    await client.call('dyn-10049', async () => 1); // recent: kept
    await client.call('dyn-0', async () => 1); // oldest: dropped
    expect(transport.allowedCalls).toEqual(['dyn-0']);
  });

  it('refuses a maxCircuits that is not a positive integer', () => {
    expect(() => createClient({ url: 'http://127.0.0.1:1', maxCircuits: 0 })).toThrow(/maxCircuits/);
  });
});
