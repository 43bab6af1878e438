// The client against the real server process (`dist/main.js`) on loopback: no mocks.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CallTimeoutError,
  CircuitOpenError,
  createClient,
  type CircuitlogClient,
  type ClientOptions,
} from '../../src/client/index.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const servers: ServerProcess[] = [];
const clients: CircuitlogClient[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});

/** A server on a fresh database whose circuits start with these defaults. */
async function serve(defaults: Record<string, number>, env: Record<string, string> = {}, dir = tempDir()) {
  const config = path.join(dir, 'circuitlog.yaml');
  const lines = Object.entries(defaults).map(([k, v]) => `  ${k}: ${v}`);
  fs.writeFileSync(config, `circuit_defaults:\n${lines.join('\n')}\n`);
  const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config, ...env });
  servers.push(server);
  return { server, dir };
}

async function connect(url: string, options: Partial<ClientOptions> = {}) {
  const client = createClient({ url, ...options });
  clients.push(client);
  await client.ready();
  return client;
}

async function circuit(server: ServerProcess, name: string): Promise<Record<string, unknown>> {
  return (await fetch(`${server.url}/circuits/${encodeURIComponent(name)}`)).json() as Promise<Record<string, unknown>>;
}

const post = (url: string, body: unknown) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

const boom = async (): Promise<never> => {
  throw new Error('boom');
};
const NEVER_TRIPS = 1_000_000_000;

describe('client against the real server', () => {
  it('decides calls on a closed circuit locally, and every outcome reaches the server', async () => {
    const { server } = await serve({ failure_threshold: NEVER_TRIPS });
    const client = await connect(server.url);
    for (let i = 0; i < 200; i++) await expect(client.call('users-api/get', boom)).rejects.toThrow('boom');
    expect(client.stats()).toMatchObject({ serverChecks: 1, localDecisions: 199 });
    await client.close();
    expect(await circuit(server, 'users-api/get')).toMatchObject({ state: 'closed', failure_count: 200 });
  });

  it('lets exactly one probe through across 3 clients while half-open', async () => {
    const { server } = await serve({ failure_threshold: 1, timeout_seconds: 1 });
    const [a, b, c] = await Promise.all([connect(server.url), connect(server.url), connect(server.url)]);
    await a.call('dep', async () => 'ok'); // every client learns the circuit
    await Promise.all([b.allowed('dep'), c.allowed('dep')]);
    await expect(a.call('dep', boom)).rejects.toThrow('boom');
    await vi.waitFor(() => expect([a, b, c].map((x) => x.state('dep'))).toEqual(['open', 'open', 'open']), {
      timeout: 10_000,
    });
    // Wait out the open time on the server's own clock (a GET makes the lazy transition).
    await vi.waitFor(async () => expect((await circuit(server, 'dep')).state).toBe('half_open'), {
      timeout: 10_000,
      interval: 100,
    });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const probe = vi.fn(() => gate.then(() => 'probed'));
    const calls = [a, b, c].map((x) => x.call('dep', probe));
    const settled = Promise.allSettled(calls);
    await vi.waitFor(() => expect(probe).toHaveBeenCalledTimes(1));
    release();
    const results = await settled;
    expect(results.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
    expect(results.filter((s) => s.status === 'rejected').map((s) => (s as PromiseRejectedResult).reason)).toEqual([
      expect.any(CircuitOpenError),
      expect.any(CircuitOpenError),
    ]);
    expect(probe).toHaveBeenCalledTimes(1);
    await a.close();
    expect((await circuit(server, 'dep')).state).toBe('closed');
  });

  it('refuses on client B a circuit client A tripped, once the stream has carried it', async () => {
    const { server } = await serve({ failure_threshold: 3 });
    const a = await connect(server.url);
    const b = await connect(server.url);
    await b.call('payments', async () => 'ok');
    const seen = new Promise((resolve) =>
      b.on('transition', (e) => e.circuit === 'payments' && e.to === 'open' && resolve(e)),
    );
    for (let i = 0; i < 3; i++) await expect(a.call('payments', boom)).rejects.toThrow('boom');
    expect(await seen).toMatchObject({ from: 'closed', to: 'open', reason: 'failure_threshold_reached' });
    const fn = vi.fn(async () => 'ran');
    await expect(b.call('payments', fn)).rejects.toBeInstanceOf(CircuitOpenError);
    expect(fn).not.toHaveBeenCalled();
  });

  it('sums 10,000 outcomes from 4 clients exactly', async () => {
    const { server } = await serve({ failure_threshold: NEVER_TRIPS });
    const fleet = await Promise.all([0, 1, 2, 3].map(() => connect(server.url, { maxBatch: 300 })));
    await Promise.all(
      fleet.map(async (client) => {
        for (let round = 0; round < 25; round++) {
          const batch = Array.from({ length: 100 }, (_, i) => client.call(`sum/${i % 2}`, boom).catch(() => undefined));
          await Promise.all(batch);
        }
      }),
    );
    await Promise.all(fleet.map((c) => c.close()));
    expect(fleet.map((c) => c.stats().outcomesAcknowledged)).toEqual([2500, 2500, 2500, 2500]);
    expect([(await circuit(server, 'sum/0')).failure_count, (await circuit(server, 'sum/1')).failure_count]).toEqual([
      5000, 5000,
    ]);
  });

  it('has circuitlog apply pipelined batches in the order recorded', async () => {
    const { server } = await serve({ failure_threshold: NEVER_TRIPS });
    const client = await connect(server.url, { flushDelayMs: 60_000 });
    for (let i = 0; i < 1_999; i++) await client.record('ordered', { success: false });
    await client.record('ordered', { success: true }); // last of the second full batch, sent while the first is out
    await client.close();
    expect((await circuit(server, 'ordered')).failure_count).toBe(0); // the success came last
  });

  it('times a slow call out, aborts its signal and records one failure', async () => {
    const { server } = await serve({ failure_threshold: NEVER_TRIPS });
    const client = await connect(server.url);
    let aborted: unknown;
    const slow = (signal: AbortSignal) =>
      new Promise<string>((resolve) =>
        signal.addEventListener('abort', () => {
          aborted = signal.reason;
          setTimeout(() => resolve('late'), 20); // finishes after the timeout: ignored
        }),
      );
    const error = await client.call('slow-svc', slow, { timeoutMs: 30 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CallTimeoutError);
    expect(aborted).toBe(error);
    await new Promise((r) => setTimeout(r, 50));
    await client.close();
    expect(await circuit(server, 'slow-svc')).toMatchObject({ failure_count: 1 });
  });

  it('answers from the fallback when the circuit refuses or the call fails', async () => {
    const { server } = await serve({ failure_threshold: 1, timeout_seconds: 60 });
    const client = await connect(server.url);
    expect(await client.call('flaky', boom, { fallback: (e) => `cached after ${(e as Error).message}` })).toBe(
      'cached after boom',
    );
    await vi.waitFor(() => expect(client.state('flaky')).toBe('open'));
    const fn = vi.fn(async () => 'fresh');
    expect(
      await client.call('flaky', fn, { fallback: (e) => (e instanceof CircuitOpenError ? 'cached' : 'other') }),
    ).toBe('cached');
    expect(fn).not.toHaveBeenCalled();
  });

  it('close() resolves only once the server has every outcome', async () => {
    const { server } = await serve({ failure_threshold: NEVER_TRIPS });
    const client = await connect(server.url, { flushDelayMs: 60_000 }); // only close() or a full batch sends
    for (let i = 0; i < 50; i++) await client.record('flush-me', { success: false, durationMs: i });
    expect(client.stats().outcomesPending).toBe(50);
    await client.close();
    expect(await circuit(server, 'flush-me')).toMatchObject({ failure_count: 50 });
  });

  it('keeps working while the server is down, cuts a failing dependency off locally, and resyncs to the server', async () => {
    const dir = tempDir();
    const { server } = await serve({ failure_threshold: 3 }, {}, dir);
    await post(`${server.url}/circuits/dep/outcomes`, { success: true }); // dep exists, with its policy
    const client = await connect(server.url, { maxQueuedOutcomes: 2 });
    await client.call('dep', async () => 'ok'); // the view learns dep's policy: 3 failures
    await vi.waitFor(() => expect(client.stats().outcomesPending).toBe(0));
    await server.stop('SIGKILL');
    await vi.waitFor(() => expect(client.connection).toBe('offline'));

    expect(await client.call('other', async () => 'still served')).toBe('still served');
    for (let i = 0; i < 3; i++) await expect(client.call('dep', boom)).rejects.toThrow('boom');
    const fn = vi.fn(async () => 'ran');
    await expect(client.call('dep', fn)).rejects.toMatchObject({ code: 'CIRCUIT_OPEN', local: true });
    expect(fn).not.toHaveBeenCalled();
    expect(client.stats()).toMatchObject({ outcomesDropped: 2, outcomesPending: 2 }); // the bound, counted

    const again = await startServer({
      CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
      CIRCUITLOG_CONFIG: path.join(dir, 'circuitlog.yaml'),
      PORT: String(server.port),
    });
    servers.push(again);
    await client.ready();
    await vi.waitFor(() => expect(client.stats().outcomesPending).toBe(0), { timeout: 10_000 });
    // The server got the 2 newest outcomes (2 failures < 3): closed, and its state wins.
    expect(await circuit(again, 'dep')).toMatchObject({ state: 'closed', failure_count: 2 });
    expect(await client.call('dep', fn)).toBe('ran');
    expect(client.state('dep')).toBe('closed');
  });

  it('replays the transitions it missed while disconnected, resuming with Last-Event-ID', async () => {
    const dir = tempDir();
    const { server } = await serve({ failure_threshold: 1 }, {}, dir);
    const client = await connect(server.url);
    const seen: string[] = [];
    client.on('transition', (e) => seen.push(`${e.circuit}:${e.to}`));
    await client.call('before', boom).catch(() => undefined);
    await vi.waitFor(() => expect(seen).toEqual(['before:open']));
    await server.stop('SIGKILL');
    await vi.waitFor(() => expect(client.connection).toBe('offline'));
    // While the client is away, another server process on the same file trips a circuit.
    const env = { CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: path.join(dir, 'circuitlog.yaml') };
    const meanwhile = await startServer(env);
    await post(`${meanwhile.url}/circuits/missed/outcomes`, { success: false });
    await meanwhile.stop('SIGTERM');
    servers.push(await startServer({ ...env, PORT: String(server.port) }));
    await client.ready();
    await vi.waitFor(() => expect(seen).toEqual(['before:open', 'missed:open']));
  });

  it('works the same against 2 server workers: exact counts, and a trip seen by every client', async () => {
    const { server } = await serve({ failure_threshold: NEVER_TRIPS }, { CIRCUITLOG_WORKERS: '2' });
    const patch = await fetch(`${server.url}/circuits/trip`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: '{"failure_threshold":1}',
    });
    expect(patch.status).toBe(201);
    const [a, b] = await Promise.all([connect(server.url), connect(server.url)]);
    await b.allowed('trip');
    const seen = new Promise((resolve) =>
      b.on('transition', (e) => e.circuit === 'trip' && e.to === 'open' && resolve(e)),
    );
    await a.call('trip', boom).catch(() => undefined);
    await seen;
    const fn = vi.fn(async () => 'ran');
    await expect(b.call('trip', fn)).rejects.toBeInstanceOf(CircuitOpenError);
    expect(fn).not.toHaveBeenCalled();
    await Promise.all(
      [a, b].map((c) =>
        Promise.all(Array.from({ length: 1_000 }, () => c.call('counted', boom).catch(() => undefined))),
      ),
    );
    await Promise.all([a.close(), b.close()]);
    expect((await circuit(server, 'counted')).failure_count).toBe(2_000);
  });
});

describe('client against a full circuit table (limits.max_circuits)', () => {
  it('records 50 failures for an existing circuit mixed with new names: the circuit opens, the new names are dropped and counted', async () => {
    const dir = tempDir();
    const config = path.join(dir, 'circuitlog.yaml');
    fs.writeFileSync(config, 'circuit_defaults:\n  failure_threshold: 5\nlimits:\n  max_circuits: 1\n');
    const server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_CONFIG: config });
    servers.push(server);
    expect((await post(`${server.url}/circuits/dep/outcomes`, { success: true })).status).toBe(200); // the table is full
    const client = await connect(server.url, { closeTimeoutMs: 5_000 });
    for (let i = 0; i < 50; i++) {
      await client.record('dep', { success: false });
      await client.record(`new-${i}`, { success: false });
    }
    await client.close(); // every batch ends recorded or dropped: close() resolves
    expect(await circuit(server, 'dep')).toMatchObject({ state: 'open' });
    expect(client.stats()).toMatchObject({ outcomesAcknowledged: 50, outcomesRejected: 50, outcomesPending: 0 });
    expect((await fetch(`${server.url}/circuits/new-0`)).status).toBe(404);
  });
});
