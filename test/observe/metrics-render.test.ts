import { describe, expect, it } from 'vitest';
import { Metrics } from '../../src/observe/metrics.js';
import { CircuitSnapshot } from '../../src/store/sqlite/circuit-snapshot.js';
import { buildObservedApp } from './observe-app.js';

// /metrics keeps each labelled circuit's lines (and the names, on SQLite) between scrapes
// (issue 20: the render at 10,000 circuits); what it sends must stay what a fresh render sends.

const gaugeLines = (text: string) => text.split('\n').filter((l) => l.startsWith('circuitlog_circuit'));

describe('the /metrics gauges between scrapes', () => {
  it('send what a render with nothing kept sends, after trips, forces, deletes, new circuits and time passing', async () => {
    const app = buildObservedApp({ maxCircuits: 4 });
    const fresh = () =>
      new Metrics({ snapshot: new CircuitSnapshot(app.db), maxCircuits: 4, clock: app.clock.now }).render();
    const scrape = async () => await (await app.request('GET', '/metrics')).text();
    const same = async () => {
      const text = await scrape();
      expect(gaugeLines(text)).toEqual(gaugeLines(await fresh()));
      return text;
    };
    for (const name of ['a', 'b', 'c', 'd', 'e']) await app.request('POST', `/circuits/${name}/success`);
    expect(await same()).toContain('circuitlog_circuit_state{circuit="b",state="closed"} 1');
    for (let i = 0; i < 5; i++) await app.request('POST', '/circuits/b/failure');
    expect(await same()).toContain('circuitlog_circuit_state{circuit="b",state="open"} 1');
    app.clock.advance(31_000); // b's open_until passes: half-open without a write
    expect(await same()).toContain('circuitlog_circuit_state{circuit="b",state="half_open"} 1');
    await app.request('PATCH', '/circuits/c', { forced_state: 'open' });
    expect(await same()).toContain('circuitlog_circuit_forced{circuit="c",forced_state="open"} 1');
    await app.request('PATCH', '/circuits/d', { window: { type: 'count', size: 10 } });
    await app.request('POST', '/circuits/d/failure');
    expect(await same()).toContain('circuitlog_circuit_failure_rate{circuit="d"} 100');
    expect((await app.request('DELETE', '/circuits/a')).status).toBe(204);
    const after = await same();
    expect(gaugeLines(after).filter((l) => l.includes('circuit="a"'))).toEqual([]); // (its counters stay, as before)
    expect(after).toContain('circuitlog_circuit_state{circuit="e",state="closed"} 1'); // moved inside the cap of 4
    await app.request('PATCH', '/circuits/c', { forced_state: null });
    expect(await same()).toContain('circuitlog_circuit_forced{circuit="c",forced_state="open"} 0');
  });
});
