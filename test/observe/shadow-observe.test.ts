// Issue 31's shadow policy in the metrics, the event stream and the audit log.
import { afterEach, describe, expect, it } from 'vitest';
import { buildAuditedApp } from '../audit/audit-app.js';
import { buildObservedApp, listen } from './observe-app.js';
import { openStream } from './sse-client.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

type App = ReturnType<typeof buildObservedApp>;
const fail = (app: App) => app.request('POST', '/circuits/svc/outcomes', { success: false });
const OPENED = '{circuit="svc",from="closed",to="open",reason="failure_threshold_reached"}';

describe('shadow transitions', () => {
  it('are counted apart, in circuitlog_shadow_transitions_total, not as the live circuit\u2019s', async () => {
    const app = buildObservedApp();
    await app.request('PATCH', '/circuits/svc', { failure_threshold: 5, shadow: { failure_threshold: 2 } });
    for (let i = 0; i < 2; i++) await fail(app);
    const m = await app.scrape();
    expect(m.get(`circuitlog_shadow_transitions_total${OPENED}`)).toBe(1);
    expect(m.get(`circuitlog_transitions_total${OPENED}`)).toBeUndefined();
    expect(m.get('circuitlog_calls_rejected_total{circuit="svc"}')).toBeUndefined();
  });

  it('are sent on the event stream marked "shadow": true', async () => {
    const app = buildObservedApp();
    const server = await listen(app);
    cleanup.push(() => server.close());
    const stream = await openStream(`${server.url}/events/stream`);
    cleanup.push(() => stream.close());
    await app.request('PATCH', '/circuits/svc', { failure_threshold: 5, shadow: { failure_threshold: 2 } });
    for (let i = 0; i < 2; i++) await fail(app);
    const event = await stream.next();
    expect(event.event).toBe('transition');
    expect(event.data).toMatchObject({ circuit: 'svc', from: 'closed', to: 'open', shadow: true });
  });
});

describe('the shadow in the audit log', () => {
  it('records setting, promoting and clearing a shadow, with the values each changed', async () => {
    const a = buildAuditedApp();
    const patch = (body: unknown) => a.request('PATCH', '/circuits/svc', undefined, body);
    expect((await patch({ failure_threshold: 5 })).status).toBe(201);
    expect((await patch({ shadow: { failure_threshold: 2 } })).status).toBe(200);
    expect((await patch({ shadow: 'promote' })).status).toBe(200);
    expect((await patch({ shadow: { timeout_seconds: 60 } })).status).toBe(200);
    expect((await patch({ shadow: null })).status).toBe(200);
    const entries = (await a.entries()).reverse();
    expect(entries.map((e) => e.action)).toEqual([
      'circuit_created',
      'shadow_set',
      'shadow_promoted',
      'shadow_set',
      'shadow_cleared',
    ]);
    const promoted = entries[2]!;
    expect(promoted.before).toMatchObject({ failure_threshold: 5, shadow: { failure_threshold: 2 } });
    expect(promoted.after).toEqual({ failure_threshold: 2, shadow: null });
    expect(entries[4]!.before.shadow).toMatchObject({ failure_threshold: 2, timeout_seconds: 60 });
  });
});
