import { describe, expect, it } from 'vitest';
import { decodeEntry } from '../../src/domain/history.js';
import { buildApp } from '../helper.js';

// Issue 32: a relay (the edge agent) names itself once per batch (`source`) and numbers each
// outcome (`seq`); a circuit applies each number at most once, so a batch sent again after its
// answer was lost counts once (docs/api.md#outcomes-sent-again). Runs on SQLite and on Redis.

type App = ReturnType<typeof buildApp>;
const SOURCE = 'edge-0c6f1a2b-test';

async function failures(t: App, name: string): Promise<number> {
  const res = await t.request('GET', `/circuits/${name}`);
  return ((await res.json()) as { failure_count: number }).failure_count;
}

async function outcomeEntries(t: App, name: string): Promise<number> {
  const stored = (await t.store.history!(name, { limit: 10_000 })) ?? [];
  return stored.map((s) => decodeEntry(s.t, s.text)!).filter((e) => e.type === 'outcome').length;
}

const batch = (source: string | undefined, seqs: number[], circuit = 'svc') => ({
  ...(source === undefined ? {} : { source }),
  outcomes: seqs.map((seq) => ({ circuit, success: false, seq })),
});

describe('POST /outcomes with a source and numbered outcomes (issue 32)', () => {
  it('applies a batch sent twice once: counts, state and history', async () => {
    const t = buildApp();
    for (let i = 0; i < 2; i++) {
      const res = await t.request('POST', '/outcomes', batch(SOURCE, [1, 2, 3]));
      expect(res.status).toBe(200);
    }
    expect(await failures(t, 'svc')).toBe(3);
    expect(await outcomeEntries(t, 'svc')).toBe(3);
    // A retry that carries the old outcomes and new ones applies only the new ones: 5 trips it.
    const res = await t.request('POST', '/outcomes', batch(SOURCE, [2, 3, 4, 5]));
    expect(((await res.json()) as { results: { state: string }[] }).results.at(-1)!.state).toBe('open');
    expect(await outcomeEntries(t, 'svc')).toBe(5);
  });

  it('counts the same numbers from another source, and outcomes without numbers always', async () => {
    const t = buildApp();
    await t.request('POST', '/outcomes', batch(SOURCE, [1, 2]));
    await t.request('POST', '/outcomes', batch('edge-another-source', [1, 2]));
    await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'svc', success: false }] });
    expect(await failures(t, 'svc')).toBe(5);
  });

  it('keeps the marks per circuit: a batch over two circuits sent again changes neither', async () => {
    const t = buildApp();
    const body = {
      source: SOURCE,
      outcomes: [
        { circuit: 'a', success: false, seq: 1 },
        { circuit: 'b', success: false, seq: 2 },
        { circuit: 'a', success: false, seq: 3 },
      ],
    };
    await t.request('POST', '/outcomes', body);
    await t.request('POST', '/outcomes', body);
    expect([await failures(t, 'a'), await failures(t, 'b')]).toEqual([2, 1]);
  });

  it('ignores seq in a batch without a source (counted as always), and refuses a malformed source', async () => {
    const t = buildApp();
    for (let i = 0; i < 2; i++) expect((await t.request('POST', '/outcomes', batch(undefined, [1]))).status).toBe(200);
    expect(await failures(t, 'svc')).toBe(2);
    const bad = await t.request('POST', '/outcomes', batch('short', [1], 'other'));
    expect(bad.status).toBe(422);
    expect(JSON.stringify(await bad.json())).toContain('"field":"source"');
    expect((await t.request('GET', '/circuits/other')).status).toBe(404);
  });
});
