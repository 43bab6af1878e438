// Issue 15: unknown keys are rejected everywhere, PATCH in another format is a 415, names are case-sensitive.
import { describe, expect, it } from 'vitest';
import { buildApp } from '../helper.js';

const fields = async (res: Response) =>
  ((await res.json()) as { errors?: { field: string }[] }).errors?.map((e) => e.field);

describe('unknown keys in a body', () => {
  it('rejects {"sucess": false} on /call with a 422 naming the key, and records nothing', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/circuits/sms/call', { sucess: false });
    expect(res.status).toBe(422);
    expect(await fields(res)).toEqual(['sucess']);
    expect((await t.request('GET', '/circuits/sms')).status).toBe(404);
  });

  it('rejects an unknown key on /outcomes', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/circuits/sms/outcomes', { success: false, duraton_ms: 5 });
    expect(res.status).toBe(422);
    expect(await fields(res)).toEqual(['duraton_ms']);
    expect((await t.request('GET', '/circuits/sms')).status).toBe(404);
  });

  it('rejects an unknown key in a batch item, named by its index, and records no item', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'a', success: false },
        { circuit: 'b', success: true, duraton_ms: 5 },
      ],
    });
    expect(res.status).toBe(422);
    expect(await fields(res)).toEqual(['outcomes.1.duraton_ms']);
    expect((await t.request('GET', '/circuits/a')).status).toBe(404);
  });

  it('rejects an unknown key beside the batch', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'a', success: true }], extra: 1 });
    expect(await fields(res)).toEqual(['extra']);
  });

  it.each([
    ['/circuits/sms/failure', { timeout_secs: 60 }, 'timeout_secs'],
    ['/circuits/sms/success', { success: true }, 'success'],
    ['/circuits/sms/reset', { force: true }, 'force'],
  ])('rejects an unknown key on %s', async (path, body, field) => {
    const t = buildApp();
    await t.request('POST', '/circuits/sms/failure');
    const before = await (await t.request('GET', '/circuits/sms')).json();
    const res = await t.request('POST', path, body);
    expect(res.status).toBe(422);
    expect(await fields(res)).toEqual([field]);
    expect(await (await t.request('GET', '/circuits/sms')).json()).toEqual(before);
  });

  it("keeps circuitlog's own fields and empty bodies accepted", async () => {
    const t = buildApp();
    expect(
      (await t.request('POST', '/circuits/sms/call', { success: false, threshold: 2, timeout_seconds: 9 })).status,
    ).toBe(200);
    expect((await t.request('POST', '/circuits/sms/failure', { timeout_seconds: 9 })).status).toBe(200);
    expect((await t.request('POST', '/circuits/sms/success', {})).status).toBe(200);
    expect((await t.request('POST', '/circuits/sms/success')).status).toBe(200);
    expect((await t.request('POST', '/circuits/sms/reset', {})).status).toBe(200);
    expect((await t.request('POST', '/circuits/sms/outcomes', { success: true, duration_ms: 3 })).status).toBe(200);
  });
});

describe('PATCH formats', () => {
  it('answers a JSON Patch (RFC 6902) with 415 and Accept-Patch, changing nothing', async () => {
    const t = buildApp();
    const res = await t.request('PATCH', '/circuits/svc', '[{"op":"replace","path":"/failure_threshold","value":2}]', {
      'content-type': 'application/json-patch+json',
    });
    expect(res.status).toBe(415);
    expect(res.headers.get('accept-patch')).toBe('application/merge-patch+json, application/json');
    expect(await res.json()).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
    expect((await t.request('GET', '/circuits/svc')).status).toBe(404);
  });

  it('still takes a merge patch as application/merge-patch+json and application/json', async () => {
    const t = buildApp();
    const merge = await t.request('PATCH', '/circuits/svc', '{"failure_threshold":2}', {
      'content-type': 'application/merge-patch+json; charset=utf-8',
    });
    expect(merge.status).toBe(201);
    expect((await t.request('PATCH', '/circuits/svc', { failure_threshold: 3 })).status).toBe(200);
  });
});

describe('circuit names', () => {
  it('are case-sensitive: Payment and payment are two circuits', async () => {
    const t = buildApp();
    for (let i = 0; i < 5; i++) await t.request('POST', '/circuits/Payment/outcomes', { success: false });
    const upper = await (await t.request('GET', '/circuits/Payment')).json();
    expect(upper).toMatchObject({ name: 'Payment', state: 'open', failure_count: 5 });
    expect((await t.request('GET', '/circuits/payment')).status).toBe(404);
    expect(await (await t.request('GET', '/circuits/payment/allowed')).json()).toMatchObject({
      allowed: true,
      circuit: null,
    });
    await t.request('POST', '/circuits/payment/outcomes', { success: true });
    const lower = await (await t.request('GET', '/circuits/payment')).json();
    expect(lower).toMatchObject({ name: 'payment', state: 'closed' });
    expect(lower.id).not.toBe(upper.id);
  });
});
