import { describe, expect, it } from 'vitest';
import { useServedApp } from './served-app.js';

// Issue 29's policy fields cleared by PATCH, and a reset that ends a cool-down as an event, on
// the wire (the domain fixes in test/domain/kinds-configure-reset.test.ts, found by the
// clients/spec vectors kinds/count_as/configure-applies-next and cool_down/circuit/reset-ends-it).

const serve = useServedApp();
// biome-ignore lint/suspicious/noExplicitAny: answers are read as loose JSON, as in the other HTTP suites
type Json = Record<string, any>;

async function app() {
  const t = await serve();
  const at = (path: string) => `${t.url}${path}`;
  const send = (method: string, path: string, body?: unknown) =>
    fetch(at(path), {
      method,
      headers: { 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  return { t, at, send };
}

describe('PATCH of issue 29 fields', () => {
  it('clears count_as and the ramp (null): a rejected call is a success again', async () => {
    const { send } = await app();
    await send('PATCH', '/circuits/svc', { count_as: { rejected: 'failure' }, ramp: { seconds: 10 } });
    const cleared = (await (await send('PATCH', '/circuits/svc', { count_as: null, ramp: null })).json()) as Json;
    expect(cleared).toMatchObject({ count_as: {}, ramp: null });
    const after = (await (await send('POST', '/circuits/svc/outcomes', { kind: 'rejected' })).json()) as Json;
    expect(after).toMatchObject({ state: 'closed', failure_count: 0 });
  });
});

describe('an operator reset during a cool-down', () => {
  it('ends it and records a closed -> closed manual_reset event', async () => {
    const { at, send } = await app();
    await send('POST', '/circuits/svc/outcomes', { kind: 'throttled', retry_after_seconds: 60 });
    expect((await fetch(at('/circuits/svc/allowed'))).status).toBe(503);
    expect((await send('POST', '/circuits/svc/reset')).status).toBe(200);
    expect((await fetch(at('/circuits/svc/allowed'))).status).toBe(200);
    const { events } = (await (await fetch(at('/circuits/svc/events'))).json()) as Json;
    expect(events.map((e: Json) => [e.reason, e.from, e.to])).toContainEqual(['manual_reset', 'closed', 'closed']);
  });
});
