import { afterEach, describe, expect, it } from 'vitest';
import { decodeEntry, type HistoryEntry } from '../../src/domain/history.js';
import { SqliteCircuitStore } from '../../src/store/sqlite/circuit-store.js';
import { defaultMigrationsDir, migrate, openDatabase, readMigrations } from '../../src/store/sqlite/database.js';
import { startNodes, type FakeNode } from '../proxy/fake-node.js';
import { startProxyApp, type ProxyApp } from '../proxy/proxy-app.js';
import { buildApp } from '../helper.js';

// Issue 31's outcome history through every route that writes (docs/operations.md#history):
// the entries the service's hooks hand the store, read back as the lab reads them.

type App = ReturnType<typeof buildApp>;
const MERGE = { 'content-type': 'application/merge-patch+json' };

async function historyOf(t: Pick<App, 'store'>, name: string): Promise<HistoryEntry[]> {
  const stored = (await t.store.history!(name, { limit: 10_000 })) ?? [];
  return stored.map((s) => decodeEntry(s.t, s.text)!);
}

const outcomes = (entries: HistoryEntry[]) => entries.filter((e) => e.type === 'outcome');
const kinds = (entries: HistoryEntry[]) =>
  entries.map((e) =>
    e.type === 'transition' ? `x:${e.transition.reason}` : e.type === 'manual' ? `m:${e.action}` : 'o',
  );

describe('the outcome history on every route (issue 31)', () => {
  it('keeps an outcome of POST /circuits/{name}/outcomes with its fields, at the step time', async () => {
    const t = buildApp();
    const at = new Date(t.clock.nowMs - 250).toISOString();
    const res = await t.request('POST', '/circuits/svc/outcomes', {
      success: false,
      duration_ms: 120,
      caller: 'orders/1',
      at,
    });
    expect(res.status).toBe(200);
    expect(await historyOf(t, 'svc')).toEqual([
      {
        type: 'outcome',
        t: t.clock.nowMs,
        // `late`: the rule the HTTP routes record by (docs/api.md), part of the outcome as the step got it.
        outcome: { success: false, durationMs: 120, caller: 'orders/1', at: t.clock.nowMs - 250, late: 'count_only' },
      },
    ]);
  });

  it('keeps a success that changes nothing on a healthy circuit (the group commit does not skip it)', async () => {
    const t = buildApp();
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    t.clock.advance(1_000);
    expect((await t.request('POST', '/circuits/svc/outcomes', { success: true, duration_ms: 3 })).status).toBe(200);
    expect(outcomes(await historyOf(t, 'svc')).map((e) => [e.t, e.outcome])).toEqual([
      [t.clock.nowMs - 1_000, { success: true, late: 'count_only' }],
      [t.clock.nowMs, { success: true, durationMs: 3, late: 'count_only' }],
    ]);
  });

  it('keeps every outcome of a batch (POST /outcomes), in order, per circuit', async () => {
    const t = buildApp();
    const res = await t.request('POST', '/outcomes', {
      outcomes: [
        { circuit: 'a', success: true, duration_ms: 1 },
        { circuit: 'b', success: false },
        { circuit: 'a', kind: 'throttled', retry_after_seconds: 2 },
        { circuit: 'a', success: true },
      ],
    });
    expect(res.status).toBe(200);
    expect(outcomes(await historyOf(t, 'a')).map((e) => e.outcome)).toMatchObject([
      { success: true, durationMs: 1 },
      { success: true, kind: 'throttled', retryAfterSeconds: 2 }, // a throttled answer is no failure (issue 29)
      { success: true },
    ]);
    expect(outcomes(await historyOf(t, 'a')).map((e) => e.outcome.durationMs)).toEqual([1, undefined, undefined]);
    expect(outcomes(await historyOf(t, 'b')).map((e) => e.outcome)).toMatchObject([{ success: false }]);
  });

  it('keeps an admitted /call and its transition, and nothing of a refused one', async () => {
    const t = buildApp();
    expect((await t.request('POST', '/circuits/svc/call', { success: false, threshold: 1 })).status).toBe(200);
    const opened = await historyOf(t, 'svc');
    expect(kinds(opened)).toEqual(['o', 'x:failure_threshold_reached']);
    expect(opened[1]).toMatchObject({ t: t.clock.nowMs, transition: { from: 'closed', to: 'open' } });
    t.clock.advance(1_000);
    const refused = await t.request('POST', '/circuits/svc/call', { success: true });
    expect(refused.status).toBe(503);
    expect(await historyOf(t, 'svc')).toEqual(opened);
  });

  it('answers a refused /call at once, without a write: it has no history entry', async () => {
    const db = openDatabase(':memory:');
    migrate(db, readMigrations(defaultMigrationsDir()));
    const sqlite = new SqliteCircuitStore(db);
    let batches = 0;
    const store = Object.assign(Object.create(sqlite) as SqliteCircuitStore, {
      applyBatch: (items: Parameters<SqliteCircuitStore['applyBatch']>[0]) => {
        batches++;
        return sqlite.applyBatch(items);
      },
    });
    const t = buildApp({ store });
    await t.request('POST', '/circuits/svc/call', { success: false, threshold: 1 });
    const written = batches;
    expect((await t.request('POST', '/circuits/svc/call', { success: true })).status).toBe(503);
    expect(batches).toBe(written);
    expect((await t.request('POST', '/circuits/svc/outcomes', { success: true })).status).toBe(200); // a late outcome: kept
    expect(batches).toBe(written + 1);
  });

  it('marks manual actions: a force, a policy change and a reset, each with its transitions', async () => {
    const t = buildApp();
    await t.request('POST', '/circuits/svc/outcomes', { success: false });
    const force = await t.request('PATCH', '/circuits/svc', JSON.stringify({ forced_state: 'open' }), MERGE);
    expect(force.status).toBe(200);
    t.clock.advance(10);
    await t.request('PATCH', '/circuits/svc', JSON.stringify({ forced_state: null, failure_threshold: 2 }), MERGE);
    t.clock.advance(10);
    await t.request('PATCH', '/circuits/svc', JSON.stringify({ failure_threshold: 2 }), MERGE); // no change: nothing
    await t.request('POST', '/circuits/svc/outcomes', { success: false });
    t.clock.advance(10);
    expect((await t.request('POST', '/circuits/svc/reset')).status).toBe(200);
    const entries = await historyOf(t, 'svc');
    expect(kinds(entries)).toEqual([
      'o',
      'm:configure',
      'x:forced_open',
      'm:configure',
      'x:force_cleared',
      'o',
      'x:failure_threshold_reached',
      'm:reset',
      'x:manual_reset',
    ]);
    const [, forced, , changed, , , , reset, resetTransition] = entries;
    expect(forced).toMatchObject({
      action: 'configure',
      before: { forcedState: null },
      after: { forcedState: 'open' },
    });
    expect(changed).toMatchObject({
      before: { forcedState: 'open', failureThreshold: 5 },
      after: { forcedState: null, failureThreshold: 2 },
    });
    expect(reset).toMatchObject({ type: 'manual', action: 'reset', t: t.clock.nowMs });
    expect(resetTransition).toMatchObject({ t: t.clock.nowMs, transition: { from: 'open', to: 'closed' } });
  });

  it('marks the circuit a PATCH creates with before: null', async () => {
    const t = buildApp();
    expect((await t.request('PATCH', '/circuits/new', JSON.stringify({ failure_threshold: 2 }), MERGE)).status).toBe(
      201,
    );
    expect(await historyOf(t, 'new')).toMatchObject([
      { type: 'manual', action: 'configure', before: null, after: { failureThreshold: 2 } },
    ]);
  });

  it('keeps nothing for a circuit whose policy says history: false, until it is turned on again', async () => {
    const t = buildApp();
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    const off = await t.request('PATCH', '/circuits/svc', JSON.stringify({ history: false }), MERGE);
    expect(off.status).toBe(200);
    expect((await off.json()).history).toBe(false);
    const before = await historyOf(t, 'svc');
    for (let i = 0; i < 6; i++) await t.request('POST', '/circuits/svc/outcomes', { success: false });
    expect((await (await t.request('GET', '/circuits/svc')).json()).state).toBe('open');
    expect(await historyOf(t, 'svc')).toEqual(before);
    expect(kinds(before)).toEqual(['o']);
    const on = await t.request('PATCH', '/circuits/svc', JSON.stringify({ history: null }), MERGE);
    expect((await on.json()).history).toBe(true);
    expect(kinds(await historyOf(t, 'svc'))).toEqual(['o', 'm:configure']);
  });

  it('keeps nothing for circuits created under circuit_defaults with history: false', async () => {
    const t = buildApp({
      circuitDefaults: { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1, history: false },
    });
    await t.request('POST', '/circuits/svc/outcomes', { success: false });
    await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'other', success: true }] });
    expect((await (await t.request('GET', '/circuits/svc')).json()).history).toBe(false);
    expect(t.db.prepare('SELECT count(*) FROM history').pluck().get()).toBe(0);
  });

  it('keeps nothing with config history.enabled false (store and service)', async () => {
    const db = openDatabase(':memory:');
    migrate(db, readMigrations(defaultMigrationsDir()));
    const store = new SqliteCircuitStore(db, false, { enabled: false, maxOutcomes: 200_000, maxAgeHours: 168 });
    const t = buildApp({ store, history: false });
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    await t.request('POST', '/outcomes', { outcomes: [{ circuit: 'svc', success: false }] });
    await t.request('POST', '/circuits/svc/call', { success: false, threshold: 1 });
    await t.request('PATCH', '/circuits/svc', JSON.stringify({ forced_state: 'closed' }), MERGE);
    await t.request('POST', '/circuits/svc/reset');
    expect(db.prepare('SELECT count(*) FROM history').pluck().get()).toBe(0);
    expect(db.prepare('SELECT count(*) FROM transitions').pluck().get()).toBeGreaterThan(0);
  });
});

describe('the proxy’s node outcomes in the history (issue 31)', () => {
  let nodes: Record<string, FakeNode> = {};
  let proxy: ProxyApp | null = null;
  afterEach(async () => {
    await proxy?.close();
    await Promise.all(Object.values(nodes).map((n) => n.stop()));
    proxy = null;
  });

  async function forwardTwice(extraYaml: string, ids: string[]) {
    nodes = await startNodes(...ids);
    proxy = await startProxyApp(nodes, extraYaml);
    for (const n of Object.values(nodes)) n.mode = 'fail';
    expect((await proxy.get('/proxy/users/x')).res.status).toBe(500); // the node's own answer, passed on
    for (const n of Object.values(nodes)) n.mode = 'ok';
    expect((await proxy.get('/proxy/users/y')).res.status).toBe(200);
    return proxy;
  }

  it('keeps each forwarded request as an outcome of its node circuit, with its duration', async () => {
    const p = await forwardTwice('retries: 0\n', ['dc1-a']);
    const entries = outcomes(await historyOf(p, 'users/dc1-a'));
    expect(entries.map((e) => e.outcome.success)).toEqual([false, true]);
    for (const e of entries) {
      expect(e.outcome.durationMs).toBeGreaterThanOrEqual(0);
    }
  });

  it('keeps the outcomes written under the ejection cap (a write that reads its peers)', async () => {
    const p = await forwardTwice('retries: 0\nmax_ejection_percent: 50\n', ['dc1-a', 'dc1-b']);
    const a = outcomes(await historyOf(p, 'users/dc1-a'));
    const b = outcomes(await historyOf(p, 'users/dc1-b'));
    expect([...a, ...b].map((e) => e.outcome.success).sort()).toEqual([false, true]);
  });
});
