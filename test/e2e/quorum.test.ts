// Issue 17 proof: quorum, caller isolation and detect-only against the real server, with
// 1 and 2 workers on SQLite and 2 workers on Redis. Outcomes and admissions name their caller.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startRedis, type RedisServer } from '../redis/redis-server.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { requestJson, type JsonAnswer } from '../fresh-request.js';

const CALLERS = ['dc1/host-1', 'dc1/host-2', 'dc2/host-3', 'dc2/host-4', 'dc2/host-5'] as const;
const BAD = CALLERS[0];

type Setup = { store: 'sqlite' | 'redis'; workers: number };
const SETUPS: Setup[] = [
  { store: 'sqlite', workers: 1 },
  { store: 'sqlite', workers: 2 },
  { store: 'redis', workers: 2 },
];

let redis: RedisServer | undefined;
let redisDb = 0;
afterAll(async () => {
  await redis?.stop('SIGKILL');
});

async function start(setup: Setup): Promise<ServerProcess> {
  const dir = tempDir();
  let store: Record<string, string>;
  if (setup.store === 'redis') {
    redis ??= await startRedis();
    store = { CIRCUITLOG_STORE: redis.url(++redisDb) };
  } else {
    store = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite') };
  }
  fs.writeFileSync(path.join(dir, 'c.yaml'), 'circuit_defaults:\n  failure_threshold: 5\n');
  const server = await startServer(
    { ...store, CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'), CIRCUITLOG_WORKERS: String(setup.workers) },
    { detached: true },
  );
  const deadline = Date.now() + 10_000;
  while (
    setup.workers > 1 &&
    new Set(server.logs.filter((l) => l.event === 'worker_listening').map((l) => l.pid)).size < setup.workers
  ) {
    if (Date.now() > deadline) throw new Error('workers did not start');
    await new Promise((r) => setTimeout(r, 25));
  }
  return server;
}

describe.each(SETUPS)('quorum and caller isolation, $store with $workers worker(s)', (setup) => {
  let server: ServerProcess;
  let n = 0;
  beforeAll(async () => {
    server = await start(setup);
  });
  afterAll(async () => {
    await server?.killGroup();
  });

  const q = (caller: string) => `?caller=${encodeURIComponent(caller)}`;
  const url = (name: string, tail = '') => `${server.url}/circuits/${encodeURIComponent(name)}${tail}`;
  const allowed = (name: string, caller: string) => requestJson(url(name, `/allowed${q(caller)}`));
  const outcome = (name: string, caller: string, success: boolean) =>
    requestJson(url(name, '/outcomes'), 'POST', { success, caller });
  const events = async (name: string) =>
    ((await requestJson(url(name, '/events?limit=500'))).json.events as Record<string, unknown>[]).reverse();
  /** A circuit of its own per run, with this policy. */
  async function circuit(policy: Record<string, unknown>): Promise<string> {
    const name = `quorum-${++n}`;
    const made = await requestJson(url(name), 'PATCH', policy);
    expect(made.status).toBe(201);
    return name;
  }
  /** One call of `caller`: ask, and if allowed report `success`. What it was told. */
  async function call(name: string, caller: string, success: boolean): Promise<JsonAnswer> {
    const asked = await allowed(name, caller);
    if (asked.status === 200) expect((await outcome(name, caller, success)).status).toBe(200);
    return asked;
  }

  /**
   * `call`, then (on Redis with 2 workers) wait until both workers answer the circuit as written:
   * each is a Redis client of its own and learns the other's write from the change feed
   * (docs/many-hosts.md: within 1 s), so a run compared call by call must not depend on which
   * worker takes the next call. One call at a time only.
   */
  async function settledCall(name: string, caller: string, success: boolean): Promise<JsonAnswer> {
    const asked = await allowed(name, caller);
    if (asked.status !== 200) return asked;
    const told = await outcome(name, caller, success);
    expect(told.status).toBe(200);
    if (setup.store === 'redis' && setup.workers > 1) {
      const written = told.json.updated_at;
      await vi.waitFor(
        async () => {
          for (let i = 0; i < 4; i++) expect((await requestJson(url(name))).json.updated_at).toBe(written);
        },
        { timeout: 5_000, interval: 10 },
      );
    }
    return asked;
  }

  it('downstream dead: five failing callers open the circuit for everyone once three failed, with one open transition', async () => {
    const name = await circuit({ failure_threshold: 2, timeout_seconds: 60, quorum: { min_callers: 3 } });
    const states: string[] = [];
    for (const caller of CALLERS.slice(0, 4)) states.push((await outcome(name, caller, false)).json.state);
    // The rule fires at two failures: withheld with 2 callers, opened at the next trip with 4.
    expect(states).toEqual(['closed', 'closed', 'closed', 'open']);
    for (const caller of CALLERS) {
      const refused = await allowed(name, caller);
      expect(refused.status).toBe(503);
      expect(refused.json).toMatchObject({ code: 'CIRCUIT_OPEN', state: 'open' });
      expect(refused.json.scope).toBeUndefined();
    }
    const log = await events(name);
    expect(log.filter((e) => e.to === 'open')).toEqual([
      expect.objectContaining({
        from: 'closed',
        reason: 'failure_threshold_reached',
        callers: [...CALLERS.slice(0, 4)].sort(),
      }),
    ]);
    expect(log.filter((e) => e.reason === 'trip_withheld')).toEqual([
      expect.objectContaining({ callers: [...CALLERS.slice(0, 2)].sort() }),
    ]);
  });

  it('one bad caller: isolated alone with a quorum (0 healthy calls refused, released by a probe); without one the same run opens for all', {
    timeout: 120_000,
  }, async () => {
    const policy = {
      failure_threshold: 3,
      timeout_seconds: 1,
      window: { type: 'count', size: 20, failure_rate_threshold: 15 },
    };
    const run = async (name: string) => {
      let healthyRefused = 0;
      let badReported = 0;
      for (let round = 0; round < 200; round++) {
        const told = await Promise.all(CALLERS.map((caller) => call(name, caller, caller !== BAD)));
        told.forEach((t, i) => {
          if (CALLERS[i] !== BAD && t.status !== 200) healthyRefused++;
          if (CALLERS[i] === BAD && t.status === 200) badReported++;
        });
      }
      return { healthyRefused, badReported };
    };
    const guarded = await circuit({ ...policy, quorum: { min_callers: 2 } });
    const plain = await circuit({ ...policy, quorum: null });
    const withQuorum = await run(guarded);
    const without = await run(plain);

    expect(withQuorum.healthyRefused).toBe(0);
    expect(without.healthyRefused).toBeGreaterThan(0);
    expect((await events(plain)).some((e) => e.to === 'open')).toBe(true);
    const log = await events(guarded);
    expect(log.some((e) => e.to === 'open')).toBe(false);
    const isolations = log.filter((e) => e.reason === 'caller_isolated');
    expect(isolations.length).toBeGreaterThan(0);
    expect(isolations.every((e) => JSON.stringify(e.callers) === JSON.stringify([BAD]))).toBe(true);

    // Isolated after failure_threshold failures of its own; then refused alone, scope caller.
    let refused = await allowed(guarded, BAD);
    if (refused.status === 200) {
      // Its open time (1 s) ran out as the run ended: this was its probe; it fails, and it is isolated again.
      await outcome(guarded, BAD, false);
      refused = await allowed(guarded, BAD);
    }
    expect(refused.status).toBe(503);
    expect(refused.json).toMatchObject({ code: 'CIRCUIT_OPEN', scope: 'caller', caller: BAD, state: 'closed' });
    const shown = (await requestJson(url(guarded))).json;
    expect(shown.state).toBe('closed');
    expect(shown.isolated_callers.map((c: { caller: string }) => c.caller)).toEqual([BAD]);
    expect(shown.isolated_callers[0].open_until).toBe(refused.json.open_until);

    // The path is mended: after its open time the bad caller gets a probe; a success releases it.
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(refused.json.open_until) - Date.now()) + 20));
    expect((await allowed(guarded, BAD)).status).toBe(200);
    expect((await outcome(guarded, BAD, true)).status).toBe(200);
    expect((await allowed(guarded, BAD)).status).toBe(200);
    expect((await requestJson(url(guarded))).json.isolated_callers).toEqual([]);
    expect((await events(guarded)).at(-1)).toMatchObject({ reason: 'caller_released', callers: [BAD] });
  });

  it('reports the bad caller isolated after exactly failure_threshold failures of its own', async () => {
    const name = await circuit({ failure_threshold: 3, timeout_seconds: 60, quorum: { min_callers: 2 } });
    const told: number[] = [];
    for (let i = 0; i < 5; i++) {
      told.push((await call(name, BAD, false)).status);
      for (const caller of CALLERS.slice(1)) expect((await call(name, caller, true)).status).toBe(200);
    }
    expect(told).toEqual([200, 200, 200, 503, 503]);
  });

  it('two callers of five, in one DC, failing with min_callers 3: the trip is withheld and both are isolated', async () => {
    const name = await circuit({
      failure_threshold: 3,
      timeout_seconds: 60,
      window: { type: 'count', size: 10, failure_rate_threshold: 30 },
      quorum: { min_callers: 3 },
    });
    const failing = new Set<string>([CALLERS[0], CALLERS[1]]);
    let healthyRefused = 0;
    // One call at a time, in caller order: with concurrent calls (two workers, Redis) the
    // interleaving decides which rule fires first, and this case is about the failure rate.
    for (let round = 0; round < 10; round++) {
      for (const caller of CALLERS) {
        const told = await call(name, caller, !failing.has(caller));
        if (!failing.has(caller) && told.status !== 200) healthyRefused++;
      }
    }
    expect(healthyRefused).toBe(0);
    const log = await events(name);
    expect(log.some((e) => e.to === 'open')).toBe(false);
    expect(log.filter((e) => e.reason === 'trip_withheld').length).toBeGreaterThan(0);
    for (const e of log.filter((e) => e.reason === 'trip_withheld'))
      expect(e).toMatchObject({ rule: 'failure_rate_exceeded', callers: [CALLERS[0], CALLERS[1]] });
    const shown = (await requestJson(url(name))).json;
    expect(shown.state).toBe('closed');
    expect(shown.isolated_callers.map((c: { caller: string }) => c.caller).sort()).toEqual([CALLERS[0], CALLERS[1]]);
  });

  it('detect-only: forced closed refuses nothing, says would_refuse exactly where the enforced runs refused, marks its events; clearing the force refuses at once', {
    timeout: 60_000,
  }, async () => {
    const policy = { failure_threshold: 2, timeout_seconds: 60, quorum: { min_callers: 3 } };
    /** The calls of both runs in a fixed order; per call: refused (enforced) or would_refuse (forced). */
    const runs = async (name: string) => {
      const marks: string[] = [];
      // "downstream dead": everyone fails; then "one bad caller" on a circuit of its own below.
      for (let round = 0; round < 4; round++) {
        for (const caller of CALLERS) {
          const t = await settledCall(name, caller, false);
          marks.push(t.status === 503 ? 'refused' : t.json.would_refuse === true ? 'would_refuse' : 'allowed');
          if (t.status === 503) expect(t.json.forced_state).toBeUndefined();
        }
      }
      return marks;
    };
    const badRun = async (name: string) => {
      const marks: string[] = [];
      for (let round = 0; round < 6; round++) {
        for (const caller of CALLERS) {
          const t = await settledCall(name, caller, caller !== BAD);
          marks.push(
            t.status === 503
              ? `refused:${t.json.scope ?? 'circuit'}`
              : t.json.would_refuse === true
                ? `would_refuse:${t.json.would_refuse_scope}`
                : 'allowed',
          );
        }
      }
      return marks;
    };
    const enforcedDead = await runs(await circuit(policy));
    const forcedDeadName = await circuit({ ...policy, forced_state: 'closed' });
    const forcedDead = await runs(forcedDeadName);
    expect(enforcedDead.filter((m) => m === 'refused').length).toBeGreaterThan(0);
    expect(forcedDead).not.toContain('refused');
    expect(forcedDead).toEqual(enforcedDead.map((m) => (m === 'refused' ? 'would_refuse' : m)));

    const enforcedBad = await badRun(await circuit(policy));
    const forcedBadName = await circuit({ ...policy, forced_state: 'closed' });
    const forcedBad = await badRun(forcedBadName);
    expect(enforcedBad).toContain('refused:caller');
    expect(forcedBad.some((m) => m.startsWith('refused'))).toBe(false);
    expect(forcedBad).toEqual(enforcedBad.map((m) => m.replace('refused', 'would_refuse')));

    // What the rules did under the force is in the log, marked.
    const deadLog = await events(forcedDeadName);
    const made = deadLog.filter((e) => ['failure_threshold_reached', 'trip_withheld'].includes(e.reason as string));
    expect(made.map((e) => e.reason)).toEqual(['trip_withheld', 'failure_threshold_reached']);
    expect(made.every((e) => e.forced_state === 'closed')).toBe(true);
    const badLog = await events(forcedBadName);
    expect(badLog.filter((e) => e.reason === 'caller_isolated')).toEqual([
      expect.objectContaining({ callers: [BAD], forced_state: 'closed' }),
    ]);

    // Enforce: the downstream-dead circuit refuses at once, from its current state.
    expect((await requestJson(url(forcedDeadName), 'PATCH', { forced_state: null })).status).toBe(200);
    const now = await allowed(forcedDeadName, CALLERS[4]);
    expect(now.status).toBe(503);
    expect(now.json).toMatchObject({ code: 'CIRCUIT_OPEN', state: 'open' });
  });
});
