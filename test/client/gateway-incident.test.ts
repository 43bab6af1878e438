// Issue 29's gateway incident replayed through the Node client, on the real server
// (dist/main.js, a temp SQLite file) before a real loopback dependency answering in 150 ms:
// 5 calls under a 50 ms caller deadline (`signal: AbortSignal.timeout(50)`), then 400 calls from
// another caller under a 2 s deadline. The Python client's replay is
// clients/python/tests/test_gateway_incident.py (run by test/client/python.test.ts).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CircuitOpenError, createClient, type CircuitlogClient, type TransitionEvent } from '../../src/client/index.js';
import { requestJson } from '../fresh-request.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function slowDependency(delayMs: number): Promise<string> {
  const server = http.createServer((_req, res) => {
    setTimeout(() => res.end('ok'), delayMs);
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

async function serve(): Promise<ServerProcess> {
  const server = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') }, { detached: true });
  cleanups.push(() => server.killGroup());
  return server;
}

async function connect(url: string, caller: string): Promise<CircuitlogClient> {
  const client = createClient({ url, caller });
  cleanups.push(() => client.close());
  await client.ready();
  return client;
}

/** One call through `client` to the dependency under the caller's own deadline; 'refused' when circuitlog refused it. */
async function call(client: CircuitlogClient, circuit: string, dependency: string, deadlineMs: number) {
  try {
    await client.call(circuit, (signal) => fetch(dependency, { signal }).then((r) => r.text()), {
      signal: AbortSignal.timeout(deadlineMs),
    });
    return 'ok';
  } catch (error) {
    if (error instanceof CircuitOpenError) return 'refused';
    if (error instanceof DOMException && error.name === 'TimeoutError') return 'deadline';
    throw error;
  }
}

describe('the gateway incident through the Node client', () => {
  // 90 s: 10 rounds of 40 calls of at least 150 ms each, on a machine the rest of the suite keeps busy.
  it('5 calls under a 50 ms deadline, then 400 under 2 s: 0 refused, closed throughout; with min_deadline_ms 40 the 5 open it', {
    timeout: 90_000,
  }, async () => {
    const dependency = await slowDependency(150);
    const server = await serve();
    const short = await connect(server.url, 'short');
    const web = await connect(server.url, 'web');
    const transitions: TransitionEvent[] = [];
    web.on('transition', (e) => transitions.push(e));

    const first: string[] = [];
    for (let i = 0; i < 5; i++) first.push(await call(short, 'llm', dependency, 50));
    expect(first).toEqual(Array(5).fill('deadline'));
    const rest: string[] = [];
    for (let round = 0; round < 10; round++)
      rest.push(...(await Promise.all(Array.from({ length: 40 }, () => call(web, 'llm', dependency, 2_000)))));
    expect(rest.filter((r) => r !== 'ok')).toEqual([]);
    await short.close(); // every outcome delivered
    await web.close();
    const after = (await requestJson(`${server.url}/circuits/llm`)).json;
    expect(after).toMatchObject({ state: 'closed', failure_count: 0 });
    expect((await requestJson(`${server.url}/circuits/llm/events`)).json.events).toEqual([]);
    expect(transitions).toEqual([]);

    // The same five calls where the policy says 40 ms was a fair chance: the dependency's failures.
    await requestJson(`${server.url}/circuits/fair`, 'PATCH', { min_deadline_ms: 40 });
    const fair = await connect(server.url, 'short');
    const opened = new Promise<TransitionEvent>((resolve) =>
      fair.on('transition', (e) => {
        if (e.circuit === 'fair' && e.to === 'open') resolve(e);
      }),
    );
    const results: string[] = [];
    for (let i = 0; i < 5; i++) results.push(await call(fair, 'fair', dependency, 50));
    expect(results).toEqual(Array(5).fill('deadline'));
    expect(await opened).toMatchObject({ from: 'closed', to: 'open', reason: 'failure_threshold_reached' });
    expect(await call(fair, 'fair', dependency, 2_000)).toBe('refused');
  });
});
