import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { newCircuit } from '../../src/domain/circuit.js';
import { buildObservedApp, parseMetrics } from './observe-app.js';

const TOKEN = 'metrics-token-0123456789';

describe('GET /metrics', () => {
  it('answers Prometheus text with the documented metric names and the default process metrics', async () => {
    const app = buildObservedApp();
    const res = await app.request('GET', '/metrics');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    for (const name of [
      'circuitlog_circuits gauge',
      'circuitlog_circuit_state gauge',
      'circuitlog_circuit_forced gauge',
      'circuitlog_circuit_failure_rate gauge',
      'circuitlog_transitions_total counter',
      'circuitlog_outcomes_total counter',
      'circuitlog_slow_calls_total counter',
      'circuitlog_calls_rejected_total counter',
      'circuitlog_outcome_duration_seconds histogram',
      'circuitlog_proxy_requests_total counter',
      'circuitlog_proxy_request_duration_seconds histogram',
      'circuitlog_proxy_fallbacks_total counter',
      'circuitlog_health_checks_total counter',
      'process_cpu_user_seconds_total counter',
      'process_resident_memory_bytes gauge',
      'nodejs_eventloop_lag_seconds gauge',
    ]) {
      expect(text).toContain(`# TYPE ${name}`);
    }
  });

  it('always exports the count of circuits in each state, zeros included', async () => {
    const app = buildObservedApp();
    let m = await app.scrape();
    expect([
      m.get('circuitlog_circuits{state="closed"}'),
      m.get('circuitlog_circuits{state="open"}'),
      m.get('circuitlog_circuits{state="half_open"}'),
    ]).toEqual([0, 0, 0]);
    await app.request('POST', '/circuits/a/success');
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/b/failure');
    m = await app.scrape();
    expect([
      m.get('circuitlog_circuits{state="closed"}'),
      m.get('circuitlog_circuits{state="open"}'),
      m.get('circuitlog_circuits{state="half_open"}'),
    ]).toEqual([1, 1, 0]);
  });

  it('reads 1 for the current state of each circuit and 0 for the others, half-open once the open time has passed', async () => {
    const app = buildObservedApp();
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/svc/failure');
    let m = await app.scrape();
    expect(
      ['closed', 'open', 'half_open'].map((s) => m.get(`circuitlog_circuit_state{circuit="svc",state="${s}"}`)),
    ).toEqual([0, 1, 0]);
    app.clock.advance(30_000); // nobody has called since: the row still says open
    m = await app.scrape();
    expect(
      ['closed', 'open', 'half_open'].map((s) => m.get(`circuitlog_circuit_state{circuit="svc",state="${s}"}`)),
    ).toEqual([0, 0, 1]);
    expect(m.get('circuitlog_circuits{state="half_open"}')).toBe(1);
  });

  it('exports both forced_state series for every circuit, 0 when not forced', async () => {
    const app = buildObservedApp();
    await app.request('POST', '/circuits/svc/success');
    const m = await app.scrape();
    expect(m.get('circuitlog_circuit_forced{circuit="svc",forced_state="open"}')).toBe(0);
    expect(m.get('circuitlog_circuit_forced{circuit="svc",forced_state="closed"}')).toBe(0);
  });

  it('counts every recorded outcome whatever the route', async () => {
    const app = buildObservedApp();
    await app.request('POST', '/circuits/svc/success');
    await app.request('POST', '/circuits/svc/failure');
    await app.request('POST', '/circuits/svc/outcomes', { success: true });
    await app.request('POST', '/circuits/svc/outcomes', { success: false });
    await app.request('POST', '/circuits/svc/call', { success: false });
    await app.request('POST', '/circuits/svc/call', { success: true });
    const m = await app.scrape();
    expect(m.get('circuitlog_outcomes_total{circuit="svc",kind="success",outcome="success"}')).toBe(3);
    expect(m.get('circuitlog_outcomes_total{circuit="svc",kind="failure",outcome="failure"}')).toBe(3);
  });

  it('counts each transition with its from, to and reason', async () => {
    const app = buildObservedApp();
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/svc/failure');
    app.clock.advance(30_000);
    await app.request('POST', '/circuits/svc/success');
    const m = await app.scrape();
    expect(
      m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="open",reason="failure_threshold_reached"}'),
    ).toBe(1);
    expect(
      m.get('circuitlog_transitions_total{circuit="svc",from="open",to="half_open",reason="open_timeout_elapsed"}'),
    ).toBe(1);
    expect(
      m.get('circuitlog_transitions_total{circuit="svc",from="half_open",to="closed",reason="probe_succeeded"}'),
    ).toBe(1);
  });

  it('counts calls refused on /allowed and /call, open or half-open without a probe slot', async () => {
    const app = buildObservedApp();
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/svc/failure');
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    expect((await app.request('POST', '/circuits/svc/call', { success: true })).status).toBe(503);
    app.clock.advance(30_000);
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(200); // takes the one probe slot
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    const m = await app.scrape();
    expect(m.get('circuitlog_calls_rejected_total{circuit="svc"}')).toBe(3);
    expect(m.get('circuitlog_outcomes_total{circuit="svc",kind="success",outcome="success"}')).toBeUndefined(); // a refused call records nothing
  });

  it('observes the duration of outcomes that carry one', async () => {
    const app = buildObservedApp();
    await app.request('POST', '/circuits/svc/outcomes', { success: true, duration_ms: 120 });
    await app.request('POST', '/circuits/svc/outcomes', { success: true });
    const m = await app.scrape();
    expect(m.get('circuitlog_outcome_duration_seconds_count{circuit="svc"}')).toBe(1);
    expect(m.get('circuitlog_outcome_duration_seconds_sum{circuit="svc"}')).toBeCloseTo(0.12, 6);
    expect(m.get('circuitlog_outcome_duration_seconds_bucket{le="0.25",circuit="svc"}')).toBe(1);
    expect(m.get('circuitlog_outcome_duration_seconds_bucket{le="0.1",circuit="svc"}')).toBe(0);
  });

  it('counts a slow call when an outcome reaches the window slow-call duration', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { window: { type: 'count', size: 100, slow_call_duration_ms: 100 } });
    await app.request('PATCH', '/circuits/plain', {});
    for (const [name, ms] of [
      ['svc', 100],
      ['svc', 99],
      ['svc', 250],
      ['plain', 5_000],
    ] as const) {
      await app.request('POST', `/circuits/${name}/outcomes`, { success: true, duration_ms: ms });
    }
    const m = await app.scrape();
    expect(m.get('circuitlog_slow_calls_total{circuit="svc"}')).toBe(2);
    expect(m.has('circuitlog_slow_calls_total{circuit="plain"}')).toBe(false); // no window: never slow
  });

  it('reads the window failure rate, for circuits with a window only', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { window: { type: 'count', size: 10 } });
    for (const success of [false, false, false, true]) await app.request('POST', '/circuits/svc/outcomes', { success });
    await app.request('POST', '/circuits/plain/failure');
    const m = await app.scrape();
    expect(m.get('circuitlog_circuit_failure_rate{circuit="svc"}')).toBe(75);
    expect(m.has('circuitlog_circuit_failure_rate{circuit="plain"}')).toBe(false);
  });

  it('drops expired time buckets from the failure rate gauge', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { window: { type: 'time', size: 10 } });
    await app.request('POST', '/circuits/svc/outcomes', { success: false });
    app.clock.advance(5_000);
    await app.request('POST', '/circuits/svc/outcomes', { success: true });
    expect((await app.scrape()).get('circuitlog_circuit_failure_rate{circuit="svc"}')).toBe(50);
    app.clock.advance(6_000); // the failure's second has left the 10 s window
    expect((await app.scrape()).get('circuitlog_circuit_failure_rate{circuit="svc"}')).toBe(0);
  });

  it('reads 1 on the forced state, counts the force events and every call it refuses', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { forced_state: 'open' });
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    expect((await app.request('POST', '/circuits/svc/call', { success: true })).status).toBe(503);
    let m = await app.scrape();
    expect(m.get('circuitlog_circuit_forced{circuit="svc",forced_state="open"}')).toBe(1);
    expect(m.get('circuitlog_circuit_forced{circuit="svc",forced_state="closed"}')).toBe(0);
    expect(m.get('circuitlog_calls_rejected_total{circuit="svc"}')).toBe(2);
    expect(m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="closed",reason="forced_open"}')).toBe(1);
    await app.request('PATCH', '/circuits/svc', { forced_state: null });
    m = await app.scrape();
    expect(m.get('circuitlog_circuit_forced{circuit="svc",forced_state="open"}')).toBe(0);
    expect(m.get('circuitlog_transitions_total{circuit="svc",from="closed",to="closed",reason="force_cleared"}')).toBe(
      1,
    );
  });

  it('counts each outcome of a batch', async () => {
    const app = buildObservedApp();
    const outcomes = [
      { circuit: 'a', success: true },
      { circuit: 'a', success: false },
      { circuit: 'b', success: false, duration_ms: 30 },
    ];
    expect((await app.request('POST', '/outcomes', { outcomes })).status).toBe(200);
    const m = await app.scrape();
    expect(m.get('circuitlog_outcomes_total{circuit="a",kind="success",outcome="success"}')).toBe(1);
    expect(m.get('circuitlog_outcomes_total{circuit="a",kind="failure",outcome="failure"}')).toBe(1);
    expect(m.get('circuitlog_outcomes_total{circuit="b",kind="failure",outcome="failure"}')).toBe(1);
    expect(m.get('circuitlog_outcome_duration_seconds_count{circuit="b"}')).toBe(1);
  });

  it('gives per-circuit series to the first max_circuits circuits only, and still counts the rest by state', async () => {
    const app = buildObservedApp({ maxCircuits: 2 });
    for (const name of ['first', 'second', 'third'])
      for (let i = 0; i < 5; i++) await app.request('POST', `/circuits/${name}/failure`);
    const m = await app.scrape();
    expect(m.get('circuitlog_circuits{state="open"}')).toBe(3);
    expect(m.get('circuitlog_circuit_state{circuit="second",state="open"}')).toBe(1);
    expect(m.get('circuitlog_outcomes_total{circuit="second",kind="failure",outcome="failure"}')).toBe(5);
    expect([...m.keys()].filter((k) => k.includes('circuit="third"'))).toEqual([]);
  });

  it('lets a circuit into the cap once an earlier one is gone', async () => {
    const app = buildObservedApp({ maxCircuits: 1 });
    await app.request('POST', '/circuits/first/failure');
    await app.request('POST', '/circuits/second/failure');
    expect(
      (await app.scrape()).has('circuitlog_outcomes_total{circuit="second",kind="failure",outcome="failure"}'),
    ).toBe(false);
    app.db.prepare("DELETE FROM circuits WHERE name = 'first'").run();
    app.clock.advance(10_001); // the "not inside the cap" memo expires
    await app.request('POST', '/circuits/second/failure');
    const m = await app.scrape();
    expect(m.get('circuitlog_outcomes_total{circuit="second",kind="failure",outcome="failure"}')).toBe(1);
    expect(m.get('circuitlog_circuit_state{circuit="second",state="closed"}')).toBe(1);
  });

  it('needs the bearer token when CIRCUITLOG_TOKEN is set', async () => {
    const app = buildObservedApp({ deps: { token: TOKEN } });
    const denied = await app.request('GET', '/metrics');
    expect(denied.status).toBe(401);
    expect(denied.headers.get('content-type')).toBe('application/problem+json');
    expect((await app.request('GET', '/metrics', undefined, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  });

  it('is absent with metrics.enabled false, and nothing is counted', async () => {
    const app = buildObservedApp({ metricsEnabled: false });
    expect(app.observe.metrics).toBeUndefined();
    expect((await app.request('GET', '/metrics')).status).toBe(404);
    expect((await app.request('POST', '/circuits/svc/failure')).status).toBe(200);
  });

  it('escapes label values as the text format requires', async () => {
    const app = buildObservedApp();
    const name = 'q"uo\\te\nx'; // not a valid API name: written straight into the table
    const c = { ...newCircuit(name, { failureThreshold: 1, timeoutSeconds: 1, halfOpenMaxCalls: 1 }, 0), id: 1 };
    app.db
      .prepare(
        'INSERT INTO circuits (name, failure_threshold, timeout_seconds, created_at, updated_at) VALUES (?, 1, 1, 0, 0)',
      )
      .run(name);
    app.observe.metrics!.rejected(c);
    const text = await (await app.request('GET', '/metrics')).text();
    const escaped = 'q\\"uo\\\\te\\nx';
    expect(text).toContain(`circuitlog_calls_rejected_total{circuit="${escaped}"} 1`);
    expect(parseMetrics(text).get(`circuitlog_circuit_state{circuit="${escaped}",state="closed"}`)).toBe(1);
  });

  it('passes promtool check metrics (the exposition linter)', async () => {
    const app = buildObservedApp();
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/svc/failure');
    app.breaker.record('svc', { success: true, durationMs: 20 });
    const text = await (await app.request('GET', '/metrics')).text();
    const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(result.error).toBeUndefined();
    const complaints = `${result.stdout}${result.stderr}`.split('\n').filter(Boolean);
    // prom-client's own nodejs_active_*_total gauges break the _total naming rule; ours may not.
    expect(
      complaints.filter(
        (line) => !/^nodejs_active_\w+_total non-counter metrics should not have "_total" suffix$/.test(line),
      ),
    ).toEqual([]);
  });
});
