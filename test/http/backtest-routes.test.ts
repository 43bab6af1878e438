import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';
import type { StoredEntry } from '../../src/domain/history.js';
import type { Backtester } from '../../src/http/backtest-routes.js';
import type { BacktestInput, RunFigures } from '../../src/lab/backtest-types.js';
import type { CircuitStore, HistoryQuery } from '../../src/store/circuit-store.js';
import { buildApp, memoryStore } from '../helper.js';

// The route over a fake engine: what it asks the engine and the store, and how it answers.

const json = async (res: Response) => (await res.json()) as any;
const MERGE = { 'content-type': 'application/merge-patch+json' };

const figures = (openings: number): RunFigures => ({
  openings,
  time_open_ms: 0,
  longest_open_ms: 0,
  refused_calls: 0,
  flaps: 0,
  detection_ms: [],
  transitions: [],
  transitions_total: 0,
  series: [],
  series_bucket_ms: 60_000,
});

/** An engine that records what it was asked and answers fixed figures. */
function fakeEngine(behaviour: { busy?: boolean; running?: boolean } = {}) {
  const inputs: BacktestInput[] = [];
  const gridValues: (readonly Record<string, number>[])[] = [];
  const engine: Backtester = {
    async backtest(input) {
      if (behaviour.busy) throw new AppError('BACKTEST_BUSY', 'Another backtest is running.', { retryAfterSeconds: 5 });
      inputs.push(input);
      return {
        circuit: input.circuit,
        from: input.from,
        to: input.to,
        outcomes: input.entries.length,
        start: 'created',
        skipped: 0,
        current: figures(1),
        proposed: figures(2),
        fidelity: { matched: 1, recorded: 1, ratio: 1, first_mismatch: null, manual_actions: 0 },
      };
    },
    async grid(input, values) {
      inputs.push(input);
      gridValues.push(values);
      const { series: _s, transitions: _t, ...rest } = figures(0);
      return {
        circuit: input.circuit,
        from: input.from,
        to: input.to,
        outcomes: input.entries.length,
        start: 'created',
        skipped: 0,
        objective: 'test',
        outages: 0,
        current: rest,
        candidates: values.map((v, i) => ({
          values: v,
          figures: rest,
          outages_caught: 0,
          meets_objective: true,
          rank: i + 1,
        })),
      };
    },
    busy: () => behaviour.running === true,
    svg: (result) => `<svg xmlns="http://www.w3.org/2000/svg"><title>${result.id}</title></svg>`,
  };
  return { engine, inputs, gridValues };
}

/** The in-memory store with a history reader answering `entries` and recording its queries. */
function storeWithHistory(entries: StoredEntry[]) {
  const { store } = memoryStore();
  const queries: HistoryQuery[] = [];
  const wrapped = new Proxy(store, {
    get(target, key, receiver) {
      if (key === 'history')
        return async (name: string, query: HistoryQuery) => {
          queries.push(query);
          if ((await target.find(name)) === null) return null;
          return entries.filter((e) => e.t >= (query.from ?? 0) && e.t < (query.to ?? Infinity)).slice(0, query.limit);
        };
      return Reflect.get(target, key, receiver);
    },
  }) as CircuitStore;
  return { store: wrapped, queries };
}

function setup(
  options: { entries?: StoredEntry[]; busy?: boolean; running?: boolean; historyMaxEntries?: number } = {},
) {
  const fake = fakeEngine(options);
  const history = storeWithHistory(options.entries ?? []);
  const t = buildApp({
    logger: pino({ level: 'error' }),
    store: history.store,
    backtester: fake.engine,
    ...(options.historyMaxEntries === undefined ? {} : { historyMaxEntries: options.historyMaxEntries }),
  });
  return { t, ...fake, queries: history.queries, store: history.store };
}

const backtest = (t: ReturnType<typeof buildApp>, name: string, body: unknown) =>
  t.request('POST', `/circuits/${name}/backtest`, body);

describe('POST /circuits/{name}/backtest', () => {
  it("replays with the live policy and the PATCH body merged over it, and answers the engine's figures with an id", async () => {
    const { t, inputs } = setup({ entries: [{ t: 1, text: '[0]' }] });
    await t.request('PATCH', '/circuits/db', JSON.stringify({ failure_threshold: 5, timeout_seconds: 30 }), MERGE);
    const res = await backtest(t, 'db', { policy: { failure_threshold: 8, window: { type: 'time', size: 15 } } });
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toMatchObject({ circuit: 'db', outcomes: 1, current: { openings: 1 }, proposed: { openings: 2 } });
    expect(body.id).toMatch(/^[A-Za-z0-9_-]+$/); // names what it replayed (src/http/backtest-picture.ts)
    const [input] = inputs;
    expect(input!.current).toMatchObject({ failureThreshold: 5, timeoutSeconds: 30, window: null });
    expect(input!.proposed).toHaveLength(1);
    expect(input!.proposed[0]).toMatchObject({
      failureThreshold: 8,
      timeoutSeconds: 30,
      window: { type: 'time', size: 15 },
    });
  });

  it('reads the history within the range, bounded by history.max_outcomes', async () => {
    const entries = [10, 20, 30, 40].map((t) => ({ t: Date.parse('2026-11-30T03:00:00Z') + t, text: '[1]' }));
    const { t, inputs, queries } = setup({ entries, historyMaxEntries: 3 });
    await t.request('POST', '/circuits/db/success');
    const res = await backtest(t, 'db', { from: '2026-11-30T03:00:00Z', to: Date.parse('2026-11-30T03:10:00Z') });
    expect(res.status).toBe(200);
    expect(queries).toEqual([
      { from: Date.parse('2026-11-30T03:00:00Z'), to: Date.parse('2026-11-30T03:10:00Z'), limit: 3 },
    ]);
    // Three entries read, the bound: the range ends at the third one's time, which is left out.
    expect(inputs[0]!.entries.map((e) => e.t)).toEqual([entries[0]!.t, entries[1]!.t]);
    expect(inputs[0]!).toMatchObject({ from: Date.parse('2026-11-30T03:00:00Z'), to: entries[2]!.t });
  });

  it('answers a grid: every combination over the proposed policy, in order', async () => {
    const { t, inputs, gridValues } = setup();
    await t.request('POST', '/circuits/db/success');
    const res = await backtest(t, 'db', {
      policy: { window: { type: 'time', size: 10 } },
      grid: { failure_threshold: [5, 8], 'window.size': [10, 15, 30] },
    });
    expect(res.status).toBe(200);
    expect((await json(res)).candidates).toHaveLength(6);
    expect(gridValues[0]![1]).toEqual({ failure_threshold: 5, 'window.size': 15 });
    expect(inputs[0]!.proposed[1]).toMatchObject({ failureThreshold: 5, window: { type: 'time', size: 15 } });
    expect(inputs[0]!.proposed[5]).toMatchObject({ failureThreshold: 8, window: { type: 'time', size: 30 } });
    expect(inputs[0]!.detectWithinSeconds).toBe(60);
  });

  it('refuses a grid of more than 100 combinations with too-many-combinations, running nothing', async () => {
    const { t, inputs } = setup();
    await t.request('POST', '/circuits/db/success');
    const res = await backtest(t, 'db', {
      grid: {
        failure_threshold: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        timeout_seconds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
      },
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/problem+json');
    expect(await json(res)).toMatchObject({
      type: '/problems/too-many-combinations',
      combinations: 110,
      max_combinations: 100,
    });
    expect(inputs).toEqual([]);
  });

  it('refuses a proposed policy PATCH would refuse (422, the field named), changing and running nothing', async () => {
    const { t, inputs } = setup();
    await t.request('POST', '/circuits/db/success');
    const before = await json(await t.request('GET', '/circuits/db'));
    const res = await backtest(t, 'db', { policy: { failure_threshold: 0, sucess: 1 } });
    expect(res.status).toBe(422);
    const body = await json(res);
    expect(body.type).toBe('/problems/validation-failed');
    expect(body.errors.map((e: { field: string }) => e.field).sort()).toEqual(['failure_threshold', 'sucess']);
    expect(inputs).toEqual([]);
    expect(await json(await t.request('GET', '/circuits/db'))).toEqual(before);
  });

  it('refuses a bad grid value as PATCH would, naming the candidate', async () => {
    const { t, inputs } = setup();
    await t.request('POST', '/circuits/db/success');
    const res = await backtest(t, 'db', {
      policy: { window: { type: 'time', size: 10 } },
      grid: { 'window.size': [10, -1] },
    });
    expect(res.status).toBe(422);
    const body = await json(res);
    expect(body.detail).toContain('window.size=-1');
    expect(inputs).toEqual([]);
  });

  it('refuses an empty range, a bad instant and an unknown field (422)', async () => {
    const { t, inputs } = setup();
    await t.request('POST', '/circuits/db/success');
    for (const body of [
      { from: 2_000, to: 1_000 },
      { from: 'yesterday' },
      { detect_within_seconds: 0 },
      { polcy: {} },
    ]) {
      const res = await backtest(t, 'db', body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
    }
    expect(inputs).toEqual([]);
  });

  it('answers 404 circuit-not-found for an unknown circuit, and creates nothing', async () => {
    const { t } = setup();
    const res = await backtest(t, 'nobody', {});
    expect(res.status).toBe(404);
    expect((await json(res)).type).toBe('/problems/circuit-not-found');
    expect((await t.request('GET', '/circuits/nobody')).status).toBe(404);
  });

  it('answers 503 backtest-busy with Retry-After while another backtest runs', async () => {
    const { t } = setup({ busy: true });
    await t.request('POST', '/circuits/db/success');
    const res = await backtest(t, 'db', {});
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('5');
    expect((await json(res)).type).toBe('/problems/backtest-busy');
  });

  it('refuses with backtest-busy before reading the history while a backtest runs', async () => {
    const { t, queries, inputs } = setup({ running: true });
    await t.request('POST', '/circuits/db/success');
    const res = await backtest(t, 'db', {});
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect((await json(res)).type).toBe('/problems/backtest-busy');
    expect(queries).toEqual([]);
    expect(inputs).toEqual([]);
  });
});

describe('GET /circuits/{name}/backtest/{id}.svg', () => {
  it("draws a kept answer as image/svg+xml; another circuit's name or an unknown id is a 404", async () => {
    const { t } = setup();
    await t.request('POST', '/circuits/db/success');
    await t.request('POST', '/circuits/other/success');
    const { id } = await json(await backtest(t, 'db', {}));
    const res = await t.request('GET', `/circuits/db/backtest/${id}.svg`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml; charset=utf-8');
    expect(await res.text()).toContain(`<title>${id}</title>`);
    expect((await t.request('GET', `/circuits/other/backtest/${id}.svg`)).status).toBe(404);
    expect((await t.request('GET', `/circuits/db/backtest/${id}.png`)).status).toBe(404);
  });

  it('draws an answer no longer kept by replaying what its id names: the same range and proposed policy', async () => {
    const { t, inputs } = setup({ entries: [{ t: 1, text: '[0]' }] });
    await t.request('POST', '/circuits/db/success');
    await t.request('PATCH', '/circuits/other', { failure_threshold: 3 }, MERGE);
    const ids: string[] = [];
    // 17 different backtests (the same one twice has the same id: it names what it replays).
    for (let i = 0; i < 17; i++)
      ids.push((await json(await backtest(t, 'db', { policy: { failure_threshold: 9 + i } }))).id);
    expect(new Set(ids).size).toBe(17);
    expect(inputs).toHaveLength(17);
    expect((await t.request('GET', `/circuits/db/backtest/${ids[1]}.svg`)).status).toBe(200); // kept
    expect(inputs).toHaveLength(17);
    const first = await t.request('GET', `/circuits/db/backtest/${ids[0]}.svg`); // evicted: replayed
    expect(first.status).toBe(200);
    expect(await first.text()).toContain(`<title>${ids[0]}</title>`);
    expect(inputs).toHaveLength(18);
    expect(inputs[17]!.proposed[0]!.failureThreshold).toBe(9);
    expect([inputs[17]!.from, inputs[17]!.to]).toEqual([inputs[0]!.from, inputs[0]!.to]);
    // An id names its circuit: another circuit's name, or a made-up or tampered id, is a 404.
    for (const path of [
      `/circuits/other/backtest/${ids[0]}.svg`,
      '/circuits/db/backtest/bm9wZQ.svg',
      `/circuits/db/backtest/${ids[0]!.slice(0, -4)}.svg`,
    ]) {
      const res = await t.request('GET', path);
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toBe('application/problem+json');
      expect((await json(res)).type).toBe('/problems/backtest-not-found');
    }
    expect(inputs).toHaveLength(18);
  });

  it('draws the picture on another process that never ran the backtest (another worker, a restart)', async () => {
    const first = setup({ entries: [{ t: 1, text: '[0]' }] });
    await first.t.request('POST', '/circuits/db/success');
    const { id } = await json(await backtest(first.t, 'db', { policy: { failure_threshold: 9 } }));
    const other = buildApp({ store: first.store, backtester: fakeEngine().engine });
    const res = await other.request('GET', `/circuits/db/backtest/${id}.svg`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/svg+xml; charset=utf-8');
  });

  it('has no picture for a grid answer (404)', async () => {
    const { t } = setup();
    await t.request('POST', '/circuits/db/success');
    const { id } = await json(await backtest(t, 'db', { grid: { failure_threshold: [3, 4] } }));
    expect((await t.request('GET', `/circuits/db/backtest/${id}.svg`)).status).toBe(404);
  });
});
