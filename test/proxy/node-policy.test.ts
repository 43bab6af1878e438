import { describe, expect, it } from 'vitest';
import { until, useProxyFixture, type ProxyApp } from './proxy-app.js';
import type { FakeNode } from './fake-node.js';

const fixture = useProxyFixture();
const MERGE = { 'content-type': 'application/merge-patch+json' };

describe('proxy node circuits and policies', () => {
  it("take the policy fields of their upstream's block", async () => {
    const app = await fixture.start(
      ['dc1-1', 'dc2-1'],
      'success_threshold: 2\nwindow: { type: count, size: 4 }\nbackoff: { multiplier: 3 }',
    );
    const circuit = (await (await app.request('GET', '/circuits/users%2Fdc1-1')).json()) as Record<string, unknown>;
    expect(circuit).toMatchObject({
      failure_threshold: 3,
      success_threshold: 2,
      window: { type: 'count', size: 4 },
      backoff: { multiplier: 3 },
    });
  });

  it('a node forced open gets no traffic; cleared, it does again', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], '');
    expect((await app.get('/proxy/users/a')).res.headers.get('x-from')).toBe('dc1-1');
    await app.request('PATCH', '/circuits/users%2Fdc1-1', JSON.stringify({ forced_state: 'open' }), MERGE);
    for (let i = 0; i < 3; i++) expect((await app.get('/proxy/users/b')).res.headers.get('x-from')).toBe('dc2-1');
    await app.request('PATCH', '/circuits/users%2Fdc1-1', JSON.stringify({ forced_state: null }), MERGE);
    expect((await app.get('/proxy/users/c')).res.headers.get('x-from')).toBe('dc1-1');
  });

  it('a node that answers slowly trips its circuit by the slow-call rate (duration: dispatch to body end)', async () => {
    const app = await fixture.start(
      ['dc1-1', 'dc2-1'],
      'health_check: { enabled: false }\nwindow: { type: count, size: 2, slow_call_duration_ms: 100 }',
    );
    const node = fixture.nodes['dc1-1']!;
    const fast = await slowGet(app, node, 0); // the fake clock does not move: 0 ms, not slow
    expect(fast.res.headers.get('x-from')).toBe('dc1-1');
    for (let i = 0; i < 2; i++) expect((await slowGet(app, node, 500)).res.status).toBe(200);
    const circuit = (await (await app.request('GET', '/circuits/users%2Fdc1-1')).json()) as Record<string, unknown>;
    expect(circuit.state).toBe('open');
    const { events } = (await (await app.request('GET', '/circuits/users%2Fdc1-1/events')).json()) as {
      events: { to: string; reason: string }[];
    };
    expect(events[0]).toMatchObject({ to: 'open', reason: 'slow_call_rate_exceeded' });
    expect((await app.get('/proxy/users/after')).res.headers.get('x-from')).toBe('dc2-1');
  });
});

/** A GET through the proxy that `node` answers once the fake clock has moved `ms` past its arrival. */
async function slowGet(app: ProxyApp, node: FakeNode, ms: number) {
  let release = () => {};
  node.gate = new Promise((resolve) => (release = resolve));
  const before = node.hits;
  const pending = app.get('/proxy/users/slow');
  await until(() => node.hits > before);
  app.clock.advance(ms);
  release();
  const got = await pending;
  node.gate = null;
  return got;
}
