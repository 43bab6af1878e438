// The edge agent's outage proof (issue 32): the server is killed with SIGKILL while outcomes
// keep arriving at two agents (one failing open, one with `--fail-open false`), and started
// again on the same database. The agents reach it through a relay (test/edge/relay-proxy.ts)
// whose URL stays valid across the restart and which is cut, before the kill, once the batches
// already on their way have been answered: so every outcome the agents acknowledged must be on
// the server exactly once afterwards, none lost and none counted twice.
import { afterEach, expect, it, vi } from 'vitest';
import {
  circuitOn,
  circuitPath,
  edgeConfig,
  edgeStats,
  patchPolicy,
  postJson,
  send,
  serveWith,
  stat,
  waitReady,
} from '../edge/edge-http.js';
import { startEdge, type EdgeProcess } from '../edge/edge-process.js';
import { startRelay, type RelayProxy } from '../edge/relay-proxy.js';
import { startServer, type ServerProcess } from '../server-process.js';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(cleanup.splice(0).map((stop) => stop()));
});

const FRESH = 'outage/fresh';
const BOUNDED = 'outage/bounded';
const CHANGED = 'outage/changed';

/**
 * Posts outcomes to the agent one request at a time (every 5th a batch of 3), until stopped or
 * at `max` items; counts the items the agent acknowledged (202).
 */
function writer(agent: string, max: number) {
  let stopped = false;
  let items = 0;
  const statuses: string[] = [];
  const waiting: { at: number; resolve: () => void }[] = [];
  const wake = () => {
    for (const w of waiting.splice(0)) {
      if (items >= w.at || stopped || items >= max) w.resolve();
      else waiting.push(w);
    }
  };
  const done = (async () => {
    for (let i = 0; !stopped && items < max; i++) {
      const answer =
        i % 5 === 4 && items + 3 <= max
          ? await postJson(agent, '/outcomes', {
              outcomes: Array.from({ length: 3 }, () => ({ circuit: FRESH, success: false })),
            })
          : await postJson(agent, circuitPath(FRESH, 'outcomes'), { success: false });
      statuses.push(`${answer.status} ${JSON.stringify(answer.body)}`);
      if (answer.status === 202) items += (answer.body as { accepted: number }).accepted;
      wake();
    }
    stopped = true;
    wake();
  })();
  return {
    statuses,
    acknowledged: () => items,
    /** Resolves once `n` items have been acknowledged (or the writer has ended). */
    reach: (n: number) =>
      new Promise<void>((resolve) => {
        waiting.push({ at: n, resolve });
        wake();
      }),
    stop: async () => {
      stopped = true;
      await done;
    },
  };
}

it('keeps answering and acknowledging through a kill -9 of the server, and delivers every acknowledged outcome exactly once', async () => {
  const { server: first, dir, env } = await serveWith('circuit_defaults:\n  failure_threshold: 1000000000\n');
  let server: ServerProcess = first;
  cleanup.push(() => server.stop('SIGKILL'));
  const relay: RelayProxy = await startRelay(server.url);
  cleanup.push(() => relay.close());
  const open = await startEdge(relay.url, {
    args: ['--config', edgeConfig(dir, 'open.yaml', 'edge:\n  max_queued_outcomes: 500\n')],
  });
  const closed = await startEdge(relay.url, {
    args: ['--config', edgeConfig(dir, 'closed.yaml', 'edge:\n  max_queued_outcomes: 5\n'), '--fail-open', 'false'],
  });
  cleanup.push(
    () => open.stop('SIGKILL'),
    () => closed.stop('SIGKILL'),
  );
  const agents: EdgeProcess[] = [open, closed];
  await Promise.all(agents.map((x) => waitReady(x.url, 200)));

  const known = circuitPath('outage/known', 'allowed');
  await postJson(server.url, circuitPath('outage/known', 'outcomes'), { success: true });
  for (const agent of agents) for (let i = 0; i < 2; i++) expect((await send(agent.url, known)).status).toBe(200);
  await patchPolicy(server.url, CHANGED, { failure_threshold: 3 });

  // Outcomes keep arriving at the fail-open agent while the server is killed (at most 450).
  const load = writer(open.url, 450);
  await load.reach(15);
  await relay.cut(); // no batch between the agent and the server from here on
  await server.stop('SIGKILL');
  await Promise.all(agents.map((x) => waitReady(x.url, 503)));
  const atOffline = load.acknowledged();
  const offlineBefore = await stat(open.url, 'offline_decisions');
  for (let i = 0; i < 20; i++) {
    expect(await send(open.url, known)).toMatchObject({ status: 200, body: { allowed: true } });
  }
  expect(await send(open.url, circuitPath('outage/never-seen', 'allowed'))).toMatchObject({ status: 200 });
  // Two failures of a circuit the server will have changed by the time they reach it.
  for (let i = 0; i < 2; i++) {
    expect(await postJson(open.url, circuitPath(CHANGED, 'outcomes'), { success: false })).toMatchObject({
      status: 202,
    });
  }
  const queuedAt = Date.now();
  expect((await stat(open.url, 'offline_decisions')) - offlineBefore).toBe(21);
  const refused = await send(closed.url, known);
  expect(refused).toMatchObject({
    status: 503,
    type: 'application/problem+json',
    body: { status: 503, code: 'CIRCUITLOG_UNAVAILABLE' },
  });
  await load.reach(atOffline + 40); // 40 more acknowledged while the server is down
  await load.stop();
  expect(load.acknowledged()).toBeGreaterThanOrEqual(atOffline + 40);
  expect(load.acknowledged()).toBeLessThan(450); // the writer was stopped, not out of items
  expect(load.statuses.filter((s) => !s.startsWith('202 '))).toEqual([]);
  expect(await stat(open.url, 'outcomes_pending')).toBeGreaterThan(0);

  // The fail-closed agent keeps at most 5: a batch of 8 in one request (so that no retry of
  // theirs is on its way meanwhile) is acknowledged, its 3 oldest dropped and counted.
  const eight = Array.from({ length: 8 }, (_, i) => ({ circuit: BOUNDED, success: false, duration_ms: i }));
  expect(await postJson(closed.url, '/outcomes', { outcomes: eight })).toMatchObject({
    status: 202,
    body: { accepted: 8 },
  });
  expect(await edgeStats(closed.url)).toMatchObject({ outcomes_pending: 5, outcomes_dropped: 3 });

  // The server again, on the same database file; the relay's URL has stayed the agents' --server.
  server = await startServer(env);
  // Before the agents are back, the circuit opens on the server, more than the server's 1 s of
  // clock tolerance after the two failures were acknowledged (the rule is in wall-clock time,
  // so that much must have passed; the outage has usually taken longer already).
  await vi.waitFor(() => expect(Date.now()).toBeGreaterThan(queuedAt + 1_500), { timeout: 5_000, interval: 50 });
  for (let i = 0; i < 3; i++) await postJson(server.url, circuitPath(CHANGED, 'outcomes'), { success: false });
  const opened = await circuitOn(server.url, CHANGED);
  expect(opened).toMatchObject({ state: 'open', failure_count: 3 });
  relay.resume(server.url);
  await Promise.all(agents.map((x) => waitReady(x.url, 200, 15_000)));
  await vi.waitFor(
    async () => expect(await Promise.all(agents.map((x) => stat(x.url, 'outcomes_pending')))).toEqual([0, 0]),
    { timeout: 15_000, interval: 50 },
  );
  expect(await circuitOn(server.url, FRESH)).toMatchObject({ state: 'closed', failure_count: load.acknowledged() });
  expect(await circuitOn(server.url, BOUNDED)).toMatchObject({ failure_count: 5 });
  // The two arrived with the time the agent acknowledged them: stale evidence, they change
  // nothing (judged as now, an open circuit's failures would add to its count).
  expect(await circuitOn(server.url, CHANGED)).toMatchObject({
    state: 'open',
    failure_count: 3,
    open_until: opened!.open_until,
  });
  expect(await send(closed.url, known)).toMatchObject({ status: 200, body: { allowed: true } });
});

it('delivers what it holds on SIGTERM and exits 0 (started as circuitlog edge)', async () => {
  const { server, dir } = await serveWith('circuit_defaults:\n  failure_threshold: 1000000000\n');
  cleanup.push(() => server.stop('SIGKILL'));
  const agent = await startEdge(server.url, {
    command: ['dist/cli.js', 'edge'],
    args: ['--config', edgeConfig(dir, 'slow.yaml', 'edge:\n  flush_ms: 1000\n')], // one batch a second at most
  });
  cleanup.push(() => agent.stop('SIGKILL'));
  await waitReady(agent.url, 200);
  for (let i = 0; i < 50; i++) {
    expect(await postJson(agent.url, circuitPath('sigterm/held', 'outcomes'), { success: false })).toMatchObject({
      status: 202,
    });
  }
  expect(await stat(agent.url, 'outcomes_pending')).toBeGreaterThan(0); // still held when the signal comes
  expect(await agent.stop('SIGTERM')).toBe(0);
  expect(agent.logs.find((l) => l.event === 'edge_stopped')).toMatchObject({ delivered: true, pending: 0 });
  expect(await circuitOn(server.url, 'sigterm/held')).toMatchObject({ failure_count: 50 });
});
