// Issue 17 in the metrics and the event stream: withheld trips, isolations, detect-only events.
import { afterEach, describe, expect, it } from 'vitest';
import { buildObservedApp, listen } from './observe-app.js';
import { openStream } from './sse-client.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

type App = ReturnType<typeof buildObservedApp>;
const fail = (app: App, caller: string) => app.request('POST', '/circuits/svc/outcomes', { success: false, caller });

describe('quorum metrics', () => {
  it('gauges the isolated callers of a quorum circuit, and none for a circuit without a quorum', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { failure_threshold: 2, quorum: { min_callers: 3 } });
    await app.request('POST', '/circuits/plain/outcomes', { success: false, caller: 'a' });
    expect((await app.scrape()).get('circuitlog_circuit_isolated_callers{circuit="svc"}')).toBe(0);
    for (const caller of ['a', 'a', 'b', 'b']) await fail(app, caller);
    const m = await app.scrape();
    expect(m.get('circuitlog_circuit_isolated_callers{circuit="svc"}')).toBe(2);
    expect(m.get('circuitlog_circuit_isolated_callers{circuit="plain"}')).toBeUndefined();
    expect(
      m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="closed",reason="caller_isolated"}'),
    ).toBe(2);
    expect(m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="closed",reason="trip_withheld"}')).toBe(
      2,
    );
  });

  it('counts what the rules did under forced closed apart, in circuitlog_detect_only_transitions_total', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', {
      failure_threshold: 2,
      forced_state: 'closed',
      quorum: { min_callers: 2 },
    });
    for (const caller of ['a', 'b']) await fail(app, caller);
    const m = await app.scrape();
    expect(
      m.get(
        'circuitlog_detect_only_transitions_total{circuit="svc",from="closed",to="open",reason="failure_threshold_reached"}',
      ),
    ).toBe(1);
    expect(
      m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="open",reason="failure_threshold_reached"}'),
    ).toBeUndefined();
    expect(m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="closed",reason="forced_closed"}')).toBe(
      1,
    );
  });
});

describe('quorum events on the stream', () => {
  it('sends trip_withheld, caller_isolated and forced-marked events with their members', async () => {
    const app = buildObservedApp();
    const server = await listen(app);
    cleanup.push(() => server.close());
    const stream = await openStream(`${server.url}/events/stream`);
    cleanup.push(() => stream.close());
    await app.request('PATCH', '/circuits/svc', {
      failure_threshold: 2,
      forced_state: 'closed',
      quorum: { min_callers: 3 },
    });
    await fail(app, 'a');
    await fail(app, 'a');
    const got = [await stream.next(), await stream.next(), await stream.next()].map((e) => e.data);
    expect(got[0]).toMatchObject({ circuit: 'svc', reason: 'forced_closed' });
    expect(got[1]).toEqual({
      circuit: 'svc',
      from: 'closed',
      to: 'closed',
      reason: 'caller_isolated',
      at: '2026-11-30T03:30:00.000Z',
      callers: ['a'],
      until: '2026-11-30T03:30:30.000Z',
      forced_state: 'closed',
    });
    expect(got[2]).toEqual({
      circuit: 'svc',
      from: 'closed',
      to: 'closed',
      reason: 'trip_withheld',
      at: '2026-11-30T03:30:00.000Z',
      rule: 'failure_threshold_reached',
      callers: ['a'],
      forced_state: 'closed',
    });
  });
});
