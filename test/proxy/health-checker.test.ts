import { describe, expect, it } from 'vitest';
import { useProxyFixture } from './proxy-app.js';

const fixture = useProxyFixture();

function setup(
  extra = 'failure_threshold: 2\ntimeout_seconds: 10\nhealth_check: { path: /health, interval_ms: 100, timeout_ms: 200 }',
) {
  return fixture.start(['dc1-1', 'dc1-2', 'dc2-1'], extra);
}

describe('active health checks', () => {
  it('opens a dead node before any client request reaches it', async () => {
    const app = await setup();
    await fixture.nodes['dc1-1']!.stop();
    await app.health.checkOnce();
    await app.health.checkOnce();
    expect((await app.breaker.get('users/dc1-1'))?.state).toBe('open');
    expect((await app.breaker.get('users/dc1-2'))?.state).toBe('closed');
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await app.get('/proxy/users/x')).res);
    expect(answers.map((r) => r.headers.get('x-node'))).toEqual(['dc1-2', 'dc1-2', 'dc1-2', 'dc1-2']);
  });

  it('counts a hanging health endpoint as a failure after timeout_ms', async () => {
    const app = await setup();
    fixture.nodes['dc1-2']!.mode = 'hang';
    const started = Date.now();
    await app.health.checkOnce();
    expect(Date.now() - started).toBeLessThan(1_000);
    expect((await app.breaker.get('users/dc1-2'))?.failureCount).toBe(1);
  });

  it('does not probe an open node inside its open time', async () => {
    const app = await setup();
    for (let i = 0; i < 2; i++) app.breaker.record('users/dc2-1', { success: false });
    const before = fixture.nodes['dc2-1']!.healthChecks;
    await app.health.checkOnce();
    expect(fixture.nodes['dc2-1']!.healthChecks).toBe(before);
  });

  it('closes an open node whose open time has passed once it answers healthy', async () => {
    const app = await setup();
    for (let i = 0; i < 2; i++) app.breaker.record('users/dc2-1', { success: false });
    app.clock.advance(10_000);
    await app.health.checkOnce();
    expect((await app.breaker.get('users/dc2-1'))?.state).toBe('closed');
  });

  it('re-opens a half-open node whose health check fails', async () => {
    const app = await setup();
    for (let i = 0; i < 2; i++) app.breaker.record('users/dc2-1', { success: false });
    app.clock.advance(10_000);
    fixture.nodes['dc2-1']!.mode = 'fail';
    await app.health.checkOnce();
    expect((await app.breaker.get('users/dc2-1'))?.state).toBe('open');
  });

  it('leaves the failure count of a closed node to real traffic', async () => {
    const app = await setup();
    app.breaker.record('users/dc1-1', { success: false });
    await app.health.checkOnce();
    expect((await app.breaker.get('users/dc1-1'))?.failureCount).toBe(1);
  });

  it('checks on its own interval after start() and stops after stop()', async () => {
    const app = await setup();
    app.health.start();
    await new Promise((resolve) => setTimeout(resolve, 350));
    app.health.stop();
    const seen = fixture.nodes['dc1-1']!.healthChecks;
    expect(seen).toBeGreaterThanOrEqual(3);
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(fixture.nodes['dc1-1']!.healthChecks).toBe(seen);
  });

  it('skips upstreams whose health checks are disabled', async () => {
    const app = await setup('health_check: { enabled: false }');
    await app.health.checkOnce();
    expect(Object.values(fixture.nodes).reduce((n, node) => n + node.healthChecks, 0)).toBe(0);
  });
});
