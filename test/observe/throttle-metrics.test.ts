import { describe, expect, it } from 'vitest';
import { buildObservedApp } from './observe-app.js';

describe('circuitlog_circuit_throttle_probability', () => {
  it('is declared as a gauge', async () => {
    const app = buildObservedApp();
    expect(await (await app.request('GET', '/metrics')).text()).toContain(
      '# TYPE circuitlog_circuit_throttle_probability gauge',
    );
  });

  it('reads the refusal probability of circuits with a throttle only, as GET /circuits shows it', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { failure_threshold: 1_000, throttle: { k: 2, window_seconds: 10 } });
    for (let i = 0; i < 10; i++) await app.request('POST', '/circuits/svc/outcomes', { success: i < 3 });
    await app.request('POST', '/circuits/plain/failure');
    const m = await app.scrape();
    expect(m.get('circuitlog_circuit_throttle_probability{circuit="svc"}')).toBeCloseTo(4 / 11, 12);
    expect(m.has('circuitlog_circuit_throttle_probability{circuit="plain"}')).toBe(false);
    const shown = (await (await app.request('GET', '/circuits/svc')).json()) as { throttle_probability: number };
    expect(shown.throttle_probability).toBeCloseTo(
      m.get('circuitlog_circuit_throttle_probability{circuit="svc"}')!,
      12,
    );
  });

  it('falls to 0 once the failures have left the window, and reads 0 while open', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { failure_threshold: 20, throttle: { k: 2, window_seconds: 10 } });
    for (let i = 0; i < 10; i++) await app.request('POST', '/circuits/svc/outcomes', { success: false });
    expect((await app.scrape()).get('circuitlog_circuit_throttle_probability{circuit="svc"}')).toBeCloseTo(10 / 11, 12);
    app.clock.advance(10_000);
    expect((await app.scrape()).get('circuitlog_circuit_throttle_probability{circuit="svc"}')).toBe(0);
    for (let i = 0; i < 20; i++) await app.request('POST', '/circuits/svc/outcomes', { success: false });
    expect((await app.scrape()).get('circuitlog_circuit_state{circuit="svc",state="open"}')).toBe(1);
    expect((await app.scrape()).get('circuitlog_circuit_throttle_probability{circuit="svc"}')).toBe(0);
  });

  it('counts a throttled call in circuitlog_calls_rejected_total', async () => {
    const app = buildObservedApp({ deps: { random: () => 0 } });
    await app.request('PATCH', '/circuits/svc', { failure_threshold: 1_000, throttle: {} });
    await app.request('POST', '/circuits/svc/outcomes', { success: false });
    expect((await app.request('GET', '/circuits/svc/allowed')).status).toBe(503);
    expect((await app.scrape()).get('circuitlog_calls_rejected_total{circuit="svc"}')).toBe(1);
  });
});
