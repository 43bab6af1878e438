// Issue 15 (high): a circuitlog restart must not re-open a circuit whose dependency already
// recovered. Real server process (killed and restarted on the same port and file), a real
// loopback dependency that recovers, and the client's queued outcomes replayed on reconnect.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, expect, it, vi } from 'vitest';
import { createClient, type CircuitlogClient } from '../../src/client/index.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const servers: ServerProcess[] = [];
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((close) => close()));
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});

/** A loopback dependency that answers 500 until `healthy` is set. */
async function dependency() {
  const state = { healthy: false, calls: 0 };
  const server = http.createServer((_req, res) => {
    state.calls++;
    res.statusCode = state.healthy ? 200 : 500;
    res.end(state.healthy ? 'ok' : 'down');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(resolve)));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const call = async (signal: AbortSignal) => {
    const res = await fetch(url, { signal });
    if (res.status !== 200) throw new Error(`dependency answered ${res.status}`);
    return res.text();
  };
  return { state, call };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it('does not re-open a recovered circuit when outcomes queued during a circuitlog restart are replayed', {
  timeout: 60_000,
}, async () => {
  const dir = tempDir();
  const config = path.join(dir, 'circuitlog.yaml');
  fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 3\n  timeout_seconds: 2\n');
  const env = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config };
  const first = await startServer(env);
  servers.push(first);
  const dep = await dependency();
  // localDefaults as the server's: circuitlog did not know dep when the client first asked.
  const client: CircuitlogClient = createClient({
    url: first.url,
    reconnectMaxDelayMs: 300,
    localDefaults: { failureThreshold: 3, timeoutSeconds: 2 },
  });
  closers.push(() => client.close());
  await client.ready();

  // The dependency fails: circuitlog opens the circuit, and the client hears of it.
  for (let i = 0; i < 3; i++) await client.call('dep', dep.call).catch(() => undefined);
  await vi.waitFor(() => expect(client.state('dep')).toBe('open'), { timeout: 10_000 });

  await first.stop('SIGKILL');
  await vi.waitFor(() => expect(client.connection).toBe('offline'), { timeout: 10_000 });

  // Offline, the local breaker probes once its open time is over: the dependency still fails.
  const attempt = () =>
    client.call('dep', dep.call).then(
      () => 'ok',
      (e: Error) => e.message,
    );
  while (dep.state.calls < 4) {
    await attempt();
    await sleep(100);
  }
  // Then it recovers, and the next local probe (2 s later) and the calls after it succeed.
  dep.state.healthy = true;
  let results: string[] = [];
  while (!results.includes('ok')) {
    results = [await attempt()];
    await sleep(100);
  }
  for (let i = 0; i < 3; i++) expect(await attempt()).toBe('ok');
  expect(client.stats().outcomesPending).toBeGreaterThanOrEqual(5); // the failed probe and the successes, queued
  await sleep(1_500); // circuitlog comes back a little later

  const restartedAt = Date.now();
  const second = await startServer({ ...env, PORT: String(first.port) });
  servers.push(second);
  await client.ready();
  await vi.waitFor(() => expect(client.stats().outcomesPending).toBe(0), { timeout: 10_000 });

  const circuit = async () => (await fetch(`${second.url}/circuits/dep`)).json() as Promise<{ state: string }>;
  expect((await circuit()).state).not.toBe('open');
  // Calls go on and the circuit closes at the first probe; nothing opened it since the restart.
  expect(await attempt()).toBe('ok');
  await vi.waitFor(async () => expect((await circuit()).state).toBe('closed'), { timeout: 5_000 });
  const { events } = (await (await fetch(`${second.url}/circuits/dep/events`)).json()) as {
    events: { to: string; at: string }[];
  };
  expect(events.filter((e) => e.to === 'open' && Date.parse(e.at) >= restartedAt)).toEqual([]);
});
