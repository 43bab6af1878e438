// Issue 29, the Node client's view: the dependency's cool-down (circuit and caller scope) and the
// shared ramp, learnt from snapshots, events and circuitlog's answers, and decided locally; the two
// new problems as client errors. A fake transport, a fake clock and injected draws.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CircuitOpenError,
  CircuitRampingError,
  DependencyThrottledError,
  createClient,
  type ClientOptions,
} from '../../src/client/index.js';
import type { AllowedAnswer } from '../../src/client/transport.js';
import { FakeTransport } from './fake-transport.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanups.splice(0).map((c) => c()));
});

const T0 = Date.parse('2030-01-01T00:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();

/** A client on a fake transport with its stream open, a clock the test moves and draws it decides. */
async function connected(circuit: Record<string, unknown> | null, options: Partial<ClientOptions> = {}) {
  const clock = { now: T0 };
  const draws = { next: 0.5 };
  const transport = new FakeTransport();
  if (circuit !== null)
    transport.answers.set('svc', { allowed: true, state: 'closed', circuit: { state: 'closed', ...circuit } });
  const client = createClient({
    url: 'http://127.0.0.1:1',
    transport,
    closeTimeoutMs: 1_000,
    caller: 'me',
    clock: () => clock.now,
    random: () => draws.next,
    ...options,
  });
  cleanups.push(() => client.close());
  await client.ready();
  return { transport, client, clock, draws };
}

const ran = vi.fn(async () => 'ran');
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => null,
    (e: unknown) => e,
  );

describe('the dependency’s cool-down', () => {
  it('refuses locally during a circuit-wide cool-down a snapshot shows, without running or asking, then admits', async () => {
    const { transport, client, clock } = await connected({ cool_until: iso(T0 + 2_500), cooling_callers: [] });
    expect(await client.call('svc', async () => 'snapshot')).toBe('snapshot'); // the first call takes the snapshot
    ran.mockClear();
    const error = await refusal(client.call('svc', ran));
    expect(error).toBeInstanceOf(DependencyThrottledError);
    expect(error).toBeInstanceOf(CircuitOpenError);
    expect(error).toMatchObject({ code: 'DEPENDENCY_THROTTLED', scope: 'circuit', retryAfter: 3, local: true });
    expect((error as DependencyThrottledError).coolUntil.toISOString()).toBe(iso(T0 + 2_500));
    expect(ran).not.toHaveBeenCalled();
    expect(await client.allowed('svc')).toBe(false);
    expect(await client.call('svc', ran, { fallback: (e) => (e as Error).name })).toBe('DependencyThrottledError');
    expect(transport.allowedCalls).toEqual(['svc']);
    clock.now = T0 + 2_500;
    expect(await client.call('svc', ran)).toBe('ran');
  });

  it('refuses this caller only during a caller-scope cool-down', async () => {
    const cooling = (caller: string) => [{ caller, cool_until: iso(T0 + 10_000) }];
    const mine = await connected({ cool_until: null, cooling_callers: cooling('me') });
    await mine.client.call('svc', async () => 'snapshot');
    expect(await refusal(mine.client.call('svc', ran))).toMatchObject({
      code: 'DEPENDENCY_THROTTLED',
      scope: 'caller',
      caller: 'me',
      retryAfter: 10,
    });
    const other = await connected({ cool_until: null, cooling_callers: cooling('someone-else') });
    await other.client.call('svc', async () => 'snapshot');
    expect(await other.client.call('svc', ran)).toBe('ran');
  });

  it('follows the cool_down and cool_down_ended events, for the circuit and for this caller only', async () => {
    const { transport, client, clock } = await connected({});
    await client.call('svc', async () => 'snapshot');
    const event = { circuit: 'svc', from: 'closed', to: 'closed', at: iso(T0) } as const;
    transport.stream!.emit({
      ...event,
      reason: 'cool_down',
      scope: 'caller',
      callers: ['other'],
      until: iso(T0 + 5_000),
    });
    expect(await client.call('svc', ran)).toBe('ran');
    transport.stream!.emit({ ...event, reason: 'cool_down', scope: 'caller', callers: ['me'], until: iso(T0 + 5_000) });
    expect(await refusal(client.call('svc', ran))).toMatchObject({ code: 'DEPENDENCY_THROTTLED', scope: 'caller' });
    transport.stream!.emit({ ...event, reason: 'cool_down_ended', scope: 'caller', callers: ['me'] });
    expect(await client.call('svc', ran)).toBe('ran');
    transport.stream!.emit({ ...event, reason: 'cool_down', scope: 'circuit', until: iso(T0 + 3_000) });
    expect(await refusal(client.call('svc', ran))).toMatchObject({ code: 'DEPENDENCY_THROTTLED', scope: 'circuit' });
    clock.now = T0 + 3_000;
    expect(await client.call('svc', ran)).toBe('ran');
    expect(client.state('svc')).toBe('closed');
  });

  it('keeps refusing during a known cool-down while circuitlog is unreachable, then the local breaker decides', async () => {
    const { transport, client, clock } = await connected({ cool_until: iso(T0 + 5_000) });
    await client.call('svc', async () => 'snapshot');
    transport.goDown();
    await vi.waitFor(() => expect(client.connection).toBe('offline'));
    expect(await refusal(client.call('svc', ran))).toMatchObject({ code: 'DEPENDENCY_THROTTLED', local: true });
    clock.now = T0 + 5_000;
    expect(await client.call('svc', ran)).toBe('ran');
    expect(client.stats().offlineDecisions).toBe(1);
  });

  it('keeps circuitlog’s dependency-throttled answer until its cool_until, then asks again', async () => {
    const { transport, client, clock } = await connected(null);
    transport.stream!.drop(); // syncing: every call asks circuitlog
    await vi.waitFor(() => expect(client.connection).toBe('syncing'));
    const answer: AllowedAnswer = {
      allowed: false,
      state: 'closed',
      retryAt: T0 + 4_000,
      retryAfterMs: 4_000,
      forced: false,
      coolDown: { until: T0 + 4_000, scope: 'circuit' },
    };
    transport.answers.set('svc', answer);
    const error = await refusal(client.call('svc', ran));
    expect(error).toMatchObject({ code: 'DEPENDENCY_THROTTLED', retryAfter: 4, local: false });
    expect(await refusal(client.call('svc', ran))).toBeInstanceOf(DependencyThrottledError);
    expect(transport.allowedCalls).toEqual(['svc']);
    transport.answers.delete('svc');
    clock.now = T0 + 4_000;
    expect(await client.call('svc', ran)).toBe('ran');
    expect(transport.allowedCalls).toEqual(['svc', 'svc']);
  });
});

describe('the shared ramp', () => {
  const ramp = { seconds: 10, start_percent: 10 };

  it('admits the policy’s share by the injected draw, growing linearly to 100', async () => {
    const { client, clock, draws } = await connected({ ramp, ramp_until: iso(T0 + 10_000) });
    draws.next = 0.05; // under 10 %
    expect(await client.call('svc', async () => 'snapshot')).toBe('snapshot');
    expect(await client.call('svc', ran)).toBe('ran');
    draws.next = 0.5;
    const error = await refusal(client.call('svc', ran));
    expect(error).toBeInstanceOf(CircuitRampingError);
    expect(error).toMatchObject({ code: 'CIRCUIT_RAMPING', rampPercent: 10, retryAfter: 1, local: true });
    expect(await client.allowed('svc')).toBe(false);
    clock.now = T0 + 5_000; // 55 %
    expect(await client.call('svc', ran)).toBe('ran');
    draws.next = 0.56;
    expect(await refusal(client.call('svc', ran))).toMatchObject({ rampPercent: 55 });
    clock.now = T0 + 10_000;
    draws.next = 0.999;
    expect(await client.call('svc', ran)).toBe('ran');
  });

  it('ramps from the ramp_until of a half_open -> closed transition', async () => {
    const { transport, client, draws } = await connected({ ramp, ramp_until: null });
    await client.call('svc', async () => 'snapshot');
    draws.next = 0.5;
    expect(await client.call('svc', ran)).toBe('ran');
    transport.stream!.emit({
      circuit: 'svc',
      from: 'half_open',
      to: 'closed',
      reason: 'probe_succeeded',
      at: iso(T0),
      rampUntil: iso(T0 + 10_000),
    });
    expect(await refusal(client.call('svc', ran))).toMatchObject({ code: 'CIRCUIT_RAMPING', rampPercent: 10 });
  });

  it('ramps after a cool-down ends, from the event’s ramp_until or, before it arrives, from cool_until', async () => {
    const { transport, client, clock, draws } = await connected({ ramp, cool_until: iso(T0 + 2_000) });
    await client.call('svc', async () => 'snapshot');
    draws.next = 0.5;
    clock.now = T0 + 2_000; // ended, no event yet: the ramp began at cool_until
    expect(await refusal(client.call('svc', ran))).toMatchObject({ code: 'CIRCUIT_RAMPING', rampPercent: 10 });
    clock.now = T0 + 7_000; // 55 %
    expect(await client.call('svc', ran)).toBe('ran');
    transport.stream!.emit({
      circuit: 'svc',
      from: 'closed',
      to: 'closed',
      reason: 'cool_down_ended',
      scope: 'circuit',
      at: iso(T0 + 7_000),
      rampUntil: iso(T0 + 17_000), // the server's ramp began later: it wins
    });
    expect(await refusal(client.call('svc', ran))).toMatchObject({ code: 'CIRCUIT_RAMPING', rampPercent: 10 });
  });

  it('throws circuitlog’s circuit-ramping answer for that call only', async () => {
    const { transport, client, clock } = await connected(null);
    transport.answers.set('svc', {
      allowed: false,
      state: 'closed',
      retryAt: T0 + 1_000,
      retryAfterMs: 1_000,
      forced: false,
      ramping: { percent: 30, rampUntil: T0 + 8_000 },
    });
    const error = await refusal(client.call('svc', ran));
    expect(error).toMatchObject({ code: 'CIRCUIT_RAMPING', rampPercent: 30, local: false });
    expect((error as CircuitRampingError).rampUntil?.toISOString()).toBe(iso(T0 + 8_000));
    transport.answers.delete('svc');
    clock.now = T0 + 8_000;
    expect(await client.call('svc', ran)).toBe('ran');
  });
});

describe('circuitlog’s two new answers and events over HTTP', () => {
  /** A loopback circuitlog that answers /allowed with `allowed` and sends `events` on the stream. */
  async function server(
    allowed: { status: number; headers: Record<string, string>; body: unknown },
    events: unknown[],
  ) {
    const srv = http.createServer((req, res) => {
      if (req.url?.startsWith('/events/stream')) {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const [i, e] of events.entries())
          res.write(`id: ${i + 1}\nevent: transition\ndata: ${JSON.stringify(e)}\n\n`);
        return;
      }
      if ((req.url ?? '').split('?')[0]?.endsWith('/allowed'))
        return void res
          .writeHead(allowed.status, { 'content-type': 'application/problem+json', ...allowed.headers })
          .end(JSON.stringify(allowed.body));
      req.resume().on('end', () => res.writeHead(204).end());
    });
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      srv.closeAllConnections();
      return new Promise((resolve) => srv.close(resolve));
    });
    return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  }

  it('maps dependency-throttled to DependencyThrottledError with Retry-After and cool_until', async () => {
    const coolUntil = new Date(Date.now() + 30_000).toISOString();
    const url = await server(
      {
        status: 503,
        headers: { 'retry-after': '30' },
        body: {
          type: '/problems/dependency-throttled',
          code: 'DEPENDENCY_THROTTLED',
          circuit: 'svc',
          state: 'closed',
          cool_until: coolUntil,
          scope: 'caller',
        },
      },
      [],
    );
    const client = createClient({ url, caller: 'me', closeTimeoutMs: 500 });
    cleanups.push(() => client.close().catch(() => undefined));
    const error = await refusal(client.call('svc', ran));
    expect(error).toBeInstanceOf(DependencyThrottledError);
    expect(error).toMatchObject({ scope: 'caller', caller: 'me', state: 'closed' });
    expect((error as DependencyThrottledError).retryAfter).toBeGreaterThanOrEqual(29);
    expect((error as DependencyThrottledError).coolUntil.toISOString()).toBe(coolUntil);
  });

  it('maps circuit-ramping to CircuitRampingError with ramp_percent and ramp_until', async () => {
    const rampUntil = new Date(Date.now() + 9_000).toISOString();
    const url = await server(
      {
        status: 503,
        headers: { 'retry-after': '1' },
        body: { code: 'CIRCUIT_RAMPING', circuit: 'svc', state: 'closed', ramp_percent: 42.5, ramp_until: rampUntil },
      },
      [],
    );
    const client = createClient({ url, closeTimeoutMs: 500 });
    cleanups.push(() => client.close().catch(() => undefined));
    const error = await refusal(client.call('svc', ran));
    expect(error).toMatchObject({ code: 'CIRCUIT_RAMPING', rampPercent: 42.5, retryAfter: 1 });
    expect((error as CircuitRampingError).rampUntil?.toISOString()).toBe(rampUntil);
  });

  it('reads a cool_down event’s scope, callers, until and retry_after_seconds, and a ramp_until', async () => {
    const until = new Date(Date.now() + 60_000).toISOString();
    const events = [
      {
        circuit: 'svc',
        from: 'closed',
        to: 'closed',
        reason: 'cool_down',
        at: until,
        scope: 'caller',
        callers: ['me'],
        until,
        retry_after_seconds: 60,
      },
      { circuit: 'svc', from: 'half_open', to: 'closed', reason: 'probe_succeeded', at: until, ramp_until: until },
    ];
    const url = await server(
      { status: 200, headers: {}, body: { allowed: true, state: 'closed', circuit: null } },
      events,
    );
    const client = createClient({ url, caller: 'me', closeTimeoutMs: 500 });
    cleanups.push(() => client.close().catch(() => undefined));
    const seen: unknown[] = [];
    client.on('transition', (e) => seen.push(e));
    await vi.waitFor(() => expect(seen).toHaveLength(2));
    expect(seen).toMatchObject([
      { reason: 'cool_down', scope: 'caller', callers: ['me'], until, retryAfterSeconds: 60 },
      { reason: 'probe_succeeded', rampUntil: until },
    ]);
  });
});
