// Issue 30, "Callers belong to credentials", through the HTTP API with identities injected
// (`createApp({ authenticate })`), on SQLite and (projects redis, redis-cluster) on Redis.
import { describe, expect, it } from 'vitest';
import type { Authenticator } from '../../src/auth/bearer.js';
import { ANONYMOUS, defaultCallers, type Identity, type Scope, TOKEN_IDENTITY } from '../../src/auth/identity.js';
import { buildApp } from '../helper.js';

type App = ReturnType<typeof buildApp>;
const MERGE = { 'content-type': 'application/merge-patch+json' };
// biome-ignore lint/suspicious/noExplicitAny: answers are read member by member
const json = async (res: Response) => (await res.json()) as any;

/** A named credential: `report` and `read`, callers `<id>` and `<id>/*` unless given. */
const credential = (id: string, callers: readonly string[] = defaultCallers(id)): Identity => ({
  ...ANONYMOUS,
  id,
  kind: 'credential',
  scopes: new Set<Scope>(['report', 'read', 'configure']),
  callers,
});

/** `Bearer <id>` is the credential `<id>` (`Bearer token`: CIRCUITLOG_TOKEN's identity); anything else 401. */
const authenticate: Authenticator = (header) => {
  const id = /^Bearer (.+)$/.exec(header ?? '')?.[1];
  if (id === undefined) return null;
  if (id === 'token') return TOKEN_IDENTITY;
  if (id === 'ops') return credential('ops', ['ops', 'shared/*']);
  return credential(id);
};
const as = (id: string) => ({ authorization: `Bearer ${id}` });

function app(): App {
  return buildApp({ authenticate });
}
const outcome = (t: App, who: string, name: string, body: Record<string, unknown>) =>
  t.request('POST', `/circuits/${name}/outcomes`, body, as(who));
const circuit = async (t: App, name: string) => json(await t.request('GET', `/circuits/${name}`, undefined, as('x')));

describe('callers belong to credentials (issue 30)', () => {
  it("refuses an outcome whose caller is outside the credential's callers with 403 caller-not-permitted, recording nothing", async () => {
    const t = app();
    const res = await outcome(t, 'checkout', 'svc', { success: false, caller: 'payments/pod-1' });
    expect(res.status).toBe(403);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
    const problem = await json(res);
    expect(problem).toMatchObject({
      type: '/problems/caller-not-permitted',
      status: 403,
      code: 'CALLER_NOT_PERMITTED',
      caller: 'payments/pod-1',
      credential: 'checkout',
    });
    expect((await t.request('GET', '/circuits/svc', undefined, as('x'))).status).toBe(404);
    // Its own id and names under it are fine; so are a credential's own patterns.
    for (const caller of ['checkout', 'checkout/pod-1', 'checkout/host/42'])
      expect((await outcome(t, 'checkout', 'svc', { success: false, caller })).status).toBe(200);
    expect((await outcome(t, 'ops', 'svc', { success: false, caller: 'shared/x' })).status).toBe(200);
    expect((await outcome(t, 'ops', 'svc', { success: false, caller: 'ops/x' })).status).toBe(403);
    expect((await circuit(t, 'svc')).failure_count).toBe(4);
  });

  it('refuses the whole batch when one item names a caller outside the credential: nothing recorded', async () => {
    const t = app();
    const res = await t.request(
      'POST',
      '/outcomes',
      {
        outcomes: [
          { circuit: 'a', success: false, caller: 'checkout/1' },
          { circuit: 'b', success: false },
          { circuit: 'c', success: false, caller: 'orders/1' },
        ],
      },
      as('checkout'),
    );
    expect(res.status).toBe(403);
    expect((await json(res)).caller).toBe('orders/1');
    for (const name of ['a', 'b', 'c'])
      expect((await t.request('GET', `/circuits/${name}`, undefined, as('x'))).status).toBe(404);
  });

  it('checks the caller of an admission and of POST /call', async () => {
    const t = app();
    const allowed = await t.request('GET', '/circuits/svc/allowed?caller=orders/1', undefined, as('checkout'));
    expect(allowed.status).toBe(403);
    expect((await json(allowed)).code).toBe('CALLER_NOT_PERMITTED');
    expect((await t.request('GET', '/circuits/svc/allowed?caller=checkout/1', undefined, as('checkout'))).status).toBe(
      200,
    );
    const call = await t.request('POST', '/circuits/svc/call?caller=orders/1', { success: false }, as('checkout'));
    expect(call.status).toBe(403);
    expect((await t.request('GET', '/circuits/svc', undefined, as('x'))).status).toBe(404);
  });

  it("reports an outcome without a caller as the credential's id (/outcomes, /success, /failure, /call, the batch)", async () => {
    const t = app();
    const patched = await t.request(
      'PATCH',
      '/circuits/svc',
      JSON.stringify({ failure_threshold: 2, quorum: { min_callers: 2 } }),
      { ...MERGE, ...as('checkout') },
    );
    expect(patched.status).toBe(201);
    await outcome(t, 'checkout', 'svc', { success: false });
    await t.request('POST', '/circuits/svc/failure', {}, as('checkout'));
    // checkout is isolated by its own two failures: the entry is the credential's id.
    const isolated = async () => (await circuit(t, 'svc')).isolated_callers.map((e: { caller: string }) => e.caller);
    expect(await isolated()).toEqual(['checkout']);
    await t.request('POST', '/circuits/svc/success', {}, as('checkout'));
    expect(await isolated()).toEqual([]);
    await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'svc', success: false }] }, as('orders'));
    await t.request('POST', '/circuits/svc/call', { success: false }, as('orders'));
    expect(await isolated()).toEqual(['orders']);
    // checkout and orders failed within the window: two credentials, the quorum of 2 is met.
    expect((await circuit(t, 'svc')).state).toBe('open');
  });

  it('keeps the rules before credentials for CIRCUITLOG_TOKEN and ANONYMOUS: any caller, no default', async () => {
    const t = app();
    expect((await outcome(t, 'token', 'svc', { success: false, caller: 'anyone/at-all' })).status).toBe(200);
    const open = buildApp();
    expect((await open.request('POST', '/circuits/svc/outcomes', { success: false, caller: 'x/y' })).status).toBe(200);
    // No caller: anonymous, no entry (a quorum circuit keeps none).
    await open.request(
      'PATCH',
      '/circuits/q',
      JSON.stringify({ failure_threshold: 1, quorum: { min_callers: 2 } }),
      MERGE,
    );
    await open.request('POST', '/circuits/q/outcomes', { success: false });
    expect((await json(await open.request('GET', '/circuits/q'))).isolated_callers).toEqual([]);
  });
});

describe('the quorum cannot be faked (issue 30)', () => {
  it('one credential failing as 5 callers, 100 times, never opens a quorum-3 circuit; 3 credentials open it at once', async () => {
    const t = app();
    const patched = await t.request(
      'PATCH',
      '/circuits/pay',
      JSON.stringify({ failure_threshold: 3, timeout_seconds: 30, quorum: { min_callers: 3, window_seconds: 60 } }),
      { ...MERGE, ...as('ops') },
    );
    expect(patched.status).toBe(201);
    const states = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const res = await outcome(t, 'mallory', 'pay', { success: false, caller: `mallory/pod-${i % 5}` });
      expect(res.status).toBe(200);
      states.add((await json(res)).state);
    }
    expect([...states]).toEqual(['closed']);
    // The others are admitted; mallory's pods are isolated each on their own.
    expect((await t.request('GET', '/circuits/pay/allowed?caller=checkout/1', undefined, as('checkout'))).status).toBe(
      200,
    );
    expect(
      (await t.request('GET', '/circuits/pay/allowed?caller=mallory/pod-3', undefined, as('mallory'))).status,
    ).toBe(503);
    // Three credentials on a quorum-3 circuit: the third failure opens it.
    await t.request(
      'PATCH',
      '/circuits/pay2',
      JSON.stringify({ failure_threshold: 3, timeout_seconds: 30, quorum: { min_callers: 3, window_seconds: 60 } }),
      { ...MERGE, ...as('ops') },
    );
    for (const [who, state] of [
      ['a', 'closed'],
      ['b', 'closed'],
      ['c', 'open'],
    ] as const)
      expect((await json(await outcome(t, who, 'pay2', { success: false }))).state).toBe(state);
    expect((await t.request('GET', '/circuits/pay2/allowed?caller=checkout/1', undefined, as('checkout'))).status).toBe(
      503,
    );
  });
  it('holds through POST /outcomes batches too: 100 items of one credential as 5 callers change nothing, 3 credentials open it', async () => {
    const t = app();
    await t.request(
      'PATCH',
      '/circuits/batched',
      JSON.stringify({ failure_threshold: 3, quorum: { min_callers: 3, window_seconds: 60 } }),
      { ...MERGE, ...as('ops') },
    );
    const items = Array.from({ length: 100 }, (_, i) => ({
      circuit: 'batched',
      success: false,
      caller: `mallory/pod-${i % 5}`,
    }));
    const faked = await t.request('POST', '/outcomes', { outcomes: items }, as('mallory'));
    expect(faked.status).toBe(200);
    expect(new Set((await json(faked)).results.map((r: { state: string }) => r.state))).toEqual(new Set(['closed']));
    const states: string[] = [];
    for (const who of ['a', 'b', 'c']) {
      const res = await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'batched', success: false }] }, as(who));
      states.push((await json(res)).results[0].state);
    }
    // mallory's failures are still in the window: one vote with a and b, so b's trip opens it.
    expect(states).toEqual(['closed', 'open', 'open']);
  });
});
