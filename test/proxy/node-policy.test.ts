import { describe, expect, it } from 'vitest';
import { useProxyFixture } from './proxy-app.js';

const fixture = useProxyFixture();
const MERGE = { 'content-type': 'application/merge-patch+json' };

describe('proxy node circuits and policies', () => {
  it("take the policy fields of their upstream's block", async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], 'success_threshold: 2\nwindow: { type: count, size: 4 }\nbackoff: { multiplier: 3 }');
    const circuit = (await (await app.request('GET', '/circuits/users%2Fdc1-1')).json()) as Record<string, unknown>;
    expect(circuit).toMatchObject({ failure_threshold: 3, success_threshold: 2, window: { type: 'count', size: 4 }, backoff: { multiplier: 3 } });
  });

  it('a node forced open gets no traffic; cleared, it does again', async () => {
    const app = await fixture.start(['dc1-1', 'dc2-1'], '');
    expect((await app.get('/proxy/users/a')).res.headers.get('x-from')).toBe('dc1-1');
    await app.request('PATCH', '/circuits/users%2Fdc1-1', JSON.stringify({ forced_state: 'open' }), MERGE);
    for (let i = 0; i < 3; i++) expect((await app.get('/proxy/users/b')).res.headers.get('x-from')).toBe('dc2-1');
    await app.request('PATCH', '/circuits/users%2Fdc1-1', JSON.stringify({ forced_state: null }), MERGE);
    expect((await app.get('/proxy/users/c')).res.headers.get('x-from')).toBe('dc1-1');
  });
});
