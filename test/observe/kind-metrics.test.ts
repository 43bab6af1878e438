import { describe, expect, it } from 'vitest';
import { buildObservedApp } from './observe-app.js';

// Issue 29 in the metrics: every kind counted in circuitlog_outcomes_total (label `kind`; `outcome`,
// the label before kinds, carries the same value), cool-downs as transitions (closed -> closed), their refusals and the ramp's as rejected
// calls, and the ramp's share as a gauge.

describe('issue 29 metrics', () => {
  it('counts every outcome by its kind in circuitlog_outcomes_total, success/failure as before', async () => {
    const app = buildObservedApp();
    const kinds = ['success', 'failure', 'rejected', 'cancelled', 'caller_deadline', 'throttled'] as const;
    for (const kind of kinds) await app.request('POST', '/circuits/svc/outcomes', { kind });
    await app.request('POST', '/circuits/svc/outcomes', { success: true });
    await app.request('POST', '/outcomes', { outcomes: [{ circuit: 'svc', kind: 'rejected' }] });
    const m = await app.scrape();
    expect(m.get('circuitlog_outcomes_total{circuit="svc",kind="success",outcome="success"}')).toBe(2);
    expect(m.get('circuitlog_outcomes_total{circuit="svc",kind="failure",outcome="failure"}')).toBe(1);
    expect(m.get('circuitlog_outcomes_total{circuit="svc",kind="rejected",outcome="rejected"}')).toBe(2);
    for (const kind of ['cancelled', 'caller_deadline', 'throttled'])
      expect(m.get(`circuitlog_outcomes_total{circuit="svc",kind="${kind}",outcome="${kind}"}`)).toBe(1);
  });

  it('counts cool-downs and their ends as transitions, and each refusal of a cooling circuit as rejected', async () => {
    const app = buildObservedApp();
    await app.request('POST', '/circuits/svc/outcomes', { kind: 'throttled', retry_after_seconds: 2 });
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    app.clock.advance(2_000);
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(200);
    const m = await app.scrape();
    const t = (reason: string) =>
      m.get(`circuitlog_transitions_total{circuit="svc",from="closed",to="closed",reason="${reason}"}`);
    expect(t('cool_down')).toBe(1);
    expect(t('cool_down_ended')).toBe(1);
    expect(m.get('circuitlog_calls_rejected_total{circuit="svc"}')).toBe(1);
  });

  it('reads the ramp share of circuits with a ramp policy in circuitlog_circuit_ramp_percent, and counts its refusals', async () => {
    const draws = { value: 0.99 };
    const app = buildObservedApp({ deps: { random: () => draws.value } });
    await app.request('PATCH', '/circuits/svc', { ramp: { seconds: 10, start_percent: 20 } });
    await app.request('POST', '/circuits/plain/failure');
    expect((await app.scrape()).get('circuitlog_circuit_ramp_percent{circuit="svc"}')).toBe(100);
    await app.request('POST', '/circuits/svc/outcomes', { kind: 'throttled', retry_after_seconds: 1 });
    app.clock.advance(6_000); // the cool-down ended at 1 s: 5 s into a 10 s ramp from 20 %
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    const m = await app.scrape();
    expect(m.get('circuitlog_circuit_ramp_percent{circuit="svc"}')).toBe(60);
    expect(m.has('circuitlog_circuit_ramp_percent{circuit="plain"}')).toBe(false);
    expect(m.get('circuitlog_calls_rejected_total{circuit="svc"}')).toBe(1);
  });
});
