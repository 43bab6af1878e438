import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { BatchedCounter, BatchedHistogram } from '../../src/observe/metrics.js';

// Values on, between and past the default bucket bounds, and two label sets.
const OBSERVED: [string, string, number][] = [
  ['a', 'n1', 0.005],
  ['a', 'n1', 0.0051],
  ['a', 'n2', 0.3],
  ['a', 'n1', 12],
  ['b', 'n1', 1],
  ['a', 'n1', 0],
];

/** The same observations through prom-client's own Counter/Histogram and through the batched ones. */
function both(): { reference: Registry; batched: Registry } {
  const reference = new Registry();
  const batched = new Registry();
  const rc = new Counter({ name: 'x_total', help: 'h', labelNames: ['upstream', 'node'], registers: [reference] });
  const rh = new Histogram({ name: 'x_seconds', help: 'h', labelNames: ['upstream', 'node'], registers: [reference] });
  const bc = new BatchedCounter({ name: 'x_total', help: 'h', labelNames: ['upstream', 'node'], registers: [batched] });
  const bh = new BatchedHistogram({ name: 'x_seconds', help: 'h', registers: [batched] });
  for (const [upstream, node, v] of OBSERVED) {
    rc.inc({ upstream, node });
    rh.observe({ upstream, node }, v);
    bc.inc(`${upstream}\0${node}`, { upstream, node });
    bh.observe(`${upstream}\0${node}`, { upstream, node }, v);
  }
  return { reference, batched };
}

describe('batched counters and histograms', () => {
  it('render byte for byte what prom-client Counter and Histogram render for the same calls', async () => {
    const { reference, batched } = both();
    const text = await batched.metrics();
    expect(text).toBe(await reference.metrics());
    expect(text).toContain('x_seconds_bucket{le="0.005",upstream="a",node="n1"} 2');
  });

  it('give the cluster aggregator the same JSON, so workers sum exactly as with prom-client', async () => {
    const { reference, batched } = both();
    expect(await batched.getMetricsAsJSON()).toEqual(await reference.getMetricsAsJSON());
    const twice = (r: Registry) => r.getMetricsAsJSON().then((m) => AggregatorRegistry.aggregate([m, m]).metrics());
    const summed = await twice(batched);
    expect(summed).toBe(await twice(reference));
    expect(summed).toContain('x_total{upstream="a",node="n1"} 8');
  });

  it('hands pending counts over once: a second scrape neither loses nor doubles them', async () => {
    const { reference, batched } = both();
    await batched.metrics();
    expect(await batched.metrics()).toBe(await reference.metrics());
  });
});
