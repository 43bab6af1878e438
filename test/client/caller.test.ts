// Issue 17 in the client library: its caller id, sent on every outcome and admission, and its
// own isolation honoured locally. Against the real server process on loopback.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultCaller } from '../../src/client/options.js';
import { CircuitOpenError, createClient, type CircuitlogClient, type ClientOptions } from '../../src/client/index.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const servers: ServerProcess[] = [];
const clients: CircuitlogClient[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});

async function serve(timeoutSeconds = 1): Promise<ServerProcess> {
  const dir = tempDir();
  fs.writeFileSync(
    path.join(dir, 'c.yaml'),
    `circuit_defaults:\n  failure_threshold: 3\n  timeout_seconds: ${timeoutSeconds}\n  quorum: {min_callers: 2}\n`,
  );
  const server = await startServer({
    CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
    CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
  });
  servers.push(server);
  return server;
}

async function connect(url: string, options: Partial<ClientOptions> = {}) {
  const client = createClient({ url, ...options });
  clients.push(client);
  await client.ready();
  return client;
}

const boom = async (): Promise<never> => {
  throw new Error('boom');
};
const json = async (url: string) => (await fetch(url)).json() as Promise<any>;

describe('client caller id', () => {
  it('defaults to the host name, made a valid caller id: processes on one host are one caller', () => {
    const host = os.hostname().replace(/[^A-Za-z0-9_.:~-]/g, '-');
    expect(createClient({ url: 'http://127.0.0.1:9', transport: undefined }).caller).toBe(host);
    expect(defaultCaller()).toBe(host);
    expect(defaultCaller('web 7(eu)')).toBe('web-7-eu-');
    expect(defaultCaller('')).toBe('host');
    expect(defaultCaller('h'.repeat(300))).toBe('h'.repeat(128));
  });

  it('refuses an invalid caller option at construction', () => {
    expect(() => createClient({ url: 'http://127.0.0.1:9', caller: 'has space' })).toThrow(TypeError);
    expect(() => createClient({ url: 'http://127.0.0.1:9', caller: '' })).toThrow(/caller/);
  });

  it('names its caller on every outcome: the server counts it toward the quorum', async () => {
    const server = await serve();
    const a = await connect(server.url, { caller: 'dc1/a' });
    const b = await connect(server.url, { caller: 'dc1/b' });
    // Failures only: each client sends its outcomes in batches of its own, so their order across clients is not the calls'.
    for (const c of [a, b, a]) await expect(c.call('dep', boom)).rejects.toThrow('boom');
    await Promise.all([a.close(), b.close()]);
    const { events } = await json(`${server.url}/circuits/dep/events`);
    expect(events[0]).toMatchObject({ to: 'open', callers: ['dc1/a', 'dc1/b'] });
  });
});

describe('client isolation', () => {
  it('refuses its own calls locally once circuitlog isolates it, while other callers still decide locally', async () => {
    const server = await serve(60);
    const bad = await connect(server.url, { caller: 'bad' });
    const good = await connect(server.url, { caller: 'good' });
    await good.call('dep', async () => 'ok');
    for (let i = 0; i < 3; i++) await expect(bad.call('dep', boom)).rejects.toThrow('boom');
    // The isolation reaches the client on its event stream; then it decides without asking.
    await vi.waitFor(
      async () => {
        const refused = await bad.call('dep', async () => 'before the event').catch((e: unknown) => e);
        expect(refused).toBeInstanceOf(CircuitOpenError);
        expect((refused as CircuitOpenError).scope).toBe('caller');
      },
      { timeout: 5_000 },
    );
    const fn = vi.fn(async () => 'never');
    const checks = bad.stats().serverChecks;
    await expect(bad.call('dep', fn)).rejects.toMatchObject({ scope: 'caller', state: 'closed', caller: 'bad' });
    expect(bad.stats().serverChecks).toBe(checks); // refused locally, no round trip
    expect(fn).not.toHaveBeenCalled();

    const goodLocal = good.stats().localDecisions;
    for (let i = 0; i < 20; i++) expect(await good.call('dep', async () => i)).toBe(i);
    expect(good.stats().localDecisions).toBe(goodLocal + 20); // the circuit stays closed for everyone else
  });

  it('asks for its probe once its open time ends, and a success releases it', async () => {
    const server = await serve();
    const bad = await connect(server.url, { caller: 'bad' });
    for (let i = 0; i < 3; i++) await expect(bad.call('dep', boom)).rejects.toThrow('boom');
    await vi.waitFor(
      async () =>
        expect(await bad.call('dep', async () => 1).catch((e: unknown) => e)).toBeInstanceOf(CircuitOpenError),
      { timeout: 5_000 },
    );
    const until = (await json(`${server.url}/circuits/dep`)).isolated_callers[0].open_until;
    await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(until) - Date.now()) + 50));
    expect(await bad.call('dep', async () => 'probe')).toBe('probe');
    await vi.waitFor(async () => expect((await json(`${server.url}/circuits/dep`)).isolated_callers).toEqual([]), {
      timeout: 5_000,
    });
    await vi.waitFor(
      async () => {
        const local = bad.stats().localDecisions;
        await bad.call('dep', async () => 2);
        expect(bad.stats().localDecisions).toBe(local + 1); // decided locally again
      },
      { timeout: 5_000 },
    );
  });
});
