import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

/** An app that holds at most two circuits, with `a` and `b` already made. */
async function full() {
  const t = buildApp({ limits: { maxCircuits: 2 } });
  expect((await t.request('POST', '/circuits/a/outcomes', { success: true })).status).toBe(200);
  expect((await t.request('POST', '/circuits/b/failure')).status).toBe(200);
  return t;
}

async function names(t: ReturnType<typeof buildApp>): Promise<string[]> {
  const body = (await (await t.request('GET', '/circuits?limit=100')).json()) as { circuits: { name: string }[] };
  return body.circuits.map((c) => c.name);
}

describe('limits.max_circuits', () => {
  it('answers 507 too-many-circuits to a new name past the limit and writes nothing', async () => {
    const t = await full();
    const res = await t.request('POST', '/circuits/c/outcomes', { success: false });
    expect(res.status).toBe(507);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(await res.json()).toMatchObject({
      type: '/problems/too-many-circuits',
      code: 'TOO_MANY_CIRCUITS',
      status: 507,
      max_circuits: 2,
      refused_circuits: ['c'],
    });
    expect((await t.request('GET', '/circuits/c')).status).toBe(404);
    expect(await names(t)).toEqual(['a', 'b']);
  });

  it('refuses every route that creates: /call, /success, /failure, PATCH and a POST /outcomes batch, all or nothing', async () => {
    const t = await full();
    expect((await t.request('POST', '/circuits/c/call', { success: true })).status).toBe(507);
    expect((await t.request('POST', '/circuits/c/success')).status).toBe(507);
    expect((await t.request('POST', '/circuits/c/failure')).status).toBe(507);
    const patch = await t.request('PATCH', '/circuits/c', JSON.stringify({ failure_threshold: 2 }), {
      'content-type': 'application/merge-patch+json',
    });
    expect(patch.status).toBe(507);
    const batch = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'a', success: false },
        { circuit: 'c', success: false },
      ],
    });
    expect(batch.status).toBe(507);
    expect(await names(t)).toEqual(['a', 'b']);
    const a = (await (await t.request('GET', '/circuits/a')).json()) as { failure_count: number };
    expect(a.failure_count).toBe(0); // the batch's item for the existing circuit was not applied either
  });

  it('names the refused circuits in a batch: the rest, sent again, is recorded', async () => {
    const t = buildApp({ limits: { maxCircuits: 3 } });
    expect((await t.request('POST', '/circuits/a/failure')).status).toBe(200);
    const outcomes = ['x', 'a', 'y', 'x', 'z'].map((circuit) => ({ circuit, success: false }));
    const res = await t.request('POST', '/outcomes', { outcomes });
    expect(res.status).toBe(507);
    // Room for two new circuits of three: x and y fit, z is refused; nothing was written.
    expect(await res.json()).toMatchObject({ code: 'TOO_MANY_CIRCUITS', refused_circuits: ['z'] });
    expect(await names(t)).toEqual(['a']);
    const rest = await t.request('POST', '/outcomes', { outcomes: outcomes.filter((o) => o.circuit !== 'z') });
    expect(rest.status).toBe(200);
    expect((await names(t)).sort()).toEqual(['a', 'x', 'y']);
    const full = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'p', success: true },
        { circuit: 'q', success: true },
      ],
    });
    expect(await full.json()).toMatchObject({ refused_circuits: ['p', 'q'] });
  });

  it('keeps existing circuits working at the limit', async () => {
    const t = await full();
    expect((await t.request('POST', '/circuits/a/failure')).status).toBe(200);
    expect((await t.request('GET', '/circuits/a/allowed')).status).toBe(200);
    expect(
      (
        await t.request('PATCH', '/circuits/b', JSON.stringify({ failure_threshold: 9 }), {
          'content-type': 'application/merge-patch+json',
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await t.request('POST', '/outcomes', {
          outcomes: [
            { circuit: 'a', success: true },
            { circuit: 'b', success: false },
          ],
        })
      ).status,
    ).toBe(200);
    expect((await t.request('GET', '/circuits/unknown/allowed')).status).toBe(200); // a read creates nothing
  });

  it('takes a new name again once a circuit is deleted', async () => {
    const t = await full();
    expect((await t.request('DELETE', '/circuits/a')).status).toBe(204);
    expect((await t.request('POST', '/circuits/c/failure')).status).toBe(200);
    expect((await t.request('POST', '/circuits/d/failure')).status).toBe(507);
  });

  it('does not let concurrent requests for new names overshoot it together', async () => {
    const t = buildApp({ limits: { maxCircuits: 3 } });
    const answers = await Promise.all(
      ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'].map((n) => t.request('POST', `/circuits/${n}/failure`)),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 507, 507, 507]);
    expect(await names(t)).toHaveLength(3);
  });
});
