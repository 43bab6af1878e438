// Issue 30 in the Node client: the default caller `<id>/<hostname>/<pid>` from GET /whoami, and a
// token from a provider or a file re-read when it changes. Against the real server with a
// credentials file, on loopback.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type CredentialEntry, tokenSha256 } from '../../src/auth/credentials.js';
import { createClient, type CircuitlogClient, type ClientOptions } from '../../src/client/index.js';
import { credentialCaller, defaultCaller } from '../../src/client/options.js';
import { authHeaders } from '../../src/client/token-source.js';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const TOKEN_A = 'token-a-0123456789abcdef0123456789';
const TOKEN_B = 'token-b-0123456789abcdef0123456789';
const OPS = 'token-ops-0123456789abcdef0123456789';

const servers: ServerProcess[] = [];
const clients: CircuitlogClient[] = [];
afterEach(async () => {
  await Promise.allSettled(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
});

const entry = (id: string, token: string, scopes: CredentialEntry['scopes'] = ['report', 'read']): CredentialEntry => ({
  id,
  token_sha256: tokenSha256(token),
  scopes,
});
const writeCredentials = (file: string, ...entries: CredentialEntry[]) => {
  fs.writeFileSync(`${file}.next`, JSON.stringify({ credentials: [...entries, entry('ops', OPS, ['admin'])] }));
  fs.renameSync(`${file}.next`, file);
};

async function serve(...entries: CredentialEntry[]): Promise<{ server: ServerProcess; credentials: string }> {
  const dir = tempDir();
  const credentials = path.join(dir, 'credentials.json');
  writeCredentials(credentials, ...entries);
  fs.writeFileSync(path.join(dir, 'c.yaml'), 'circuit_defaults:\n  failure_threshold: 3\n  quorum: {min_callers: 2}\n');
  const server = await startServer({
    CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
    CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
    CIRCUITLOG_CREDENTIALS: credentials,
  });
  servers.push(server);
  return { server, credentials };
}

async function connect(options: ClientOptions): Promise<CircuitlogClient> {
  const client = createClient(options);
  clients.push(client);
  await client.ready();
  return client;
}

const get = async (url: string, token = OPS) =>
  // biome-ignore lint/suspicious/noExplicitAny: answers are read member by member
  (await fetch(url, { headers: { authorization: `Bearer ${token}` } })).json() as Promise<any>;
const boom = async (): Promise<never> => {
  throw new Error('boom');
};

describe('the Node client with a named credential', () => {
  it("defaults its caller to <id>/<hostname>/<pid> from GET /whoami, and the server counts it as that credential's", async () => {
    const { server } = await serve(entry('checkout', TOKEN_A));
    const client = await connect({ url: server.url, token: TOKEN_A });
    const expected = `checkout/${defaultCaller()}/${process.pid}`;
    await expect(client.call('dep', boom)).rejects.toThrow('boom');
    expect(client.caller).toBe(expected);
    for (let i = 0; i < 2; i++) await expect(client.call('dep', boom)).rejects.toThrow('boom');
    await client.close();
    expect(client.stats().outcomesRejected).toBe(0);
    // Its own three failures isolate it alone (the quorum of 2 withholds the trip).
    const circuit = await get(`${server.url}/circuits/dep`);
    expect(circuit.state).toBe('closed');
    expect(circuit.isolated_callers.map((e: { caller: string }) => e.caller)).toEqual([expected]);
  });

  it('keeps an explicit caller, and the host name without a token or with CIRCUITLOG_TOKEN (no caller patterns)', () => {
    expect(credentialCaller('token', null, 'web-1', 42)).toBe('web-1');
    expect(credentialCaller('checkout', ['checkout', 'checkout/*'], 'web 1', 42)).toBe('checkout/web-1/42');
    expect(credentialCaller('checkout', ['checkout'], 'web-1', 42)).toBe('checkout');
    expect(credentialCaller('checkout', ['shared/*'], 'web-1', 42)).toBeUndefined();
    expect(createClient({ url: 'http://127.0.0.1:9', caller: 'me', token: 'x' }).caller).toBe('me');
  });

  it('asks a token provider (async) before its requests', async () => {
    const { server } = await serve(entry('checkout', TOKEN_A));
    const provider = vi.fn(async () => TOKEN_A);
    const client = await connect({ url: server.url, token: provider });
    await client.call('dep', async () => 'ok');
    await client.close();
    expect(provider).toHaveBeenCalled();
    expect(client.stats()).toMatchObject({ outcomesAcknowledged: 1, outcomesRejected: 0 });
    expect(client.caller).toBe(`checkout/${defaultCaller()}/${process.pid}`);
  });

  it('re-reads a token file when it changes (a rotated service-account token): no outcome refused', async () => {
    const { server, credentials } = await serve(entry('checkout', TOKEN_A));
    const dir = tempDir();
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, `${TOKEN_A}\n`);
    let offsetMs = 0;
    const client = await connect({ url: server.url, tokenFile, clock: () => Date.now() + offsetMs });
    await expect(client.call('dep', boom)).rejects.toThrow('boom');
    // The server now knows the credential by its new token only; then the file is rotated.
    writeCredentials(credentials, entry('checkout', TOKEN_B));
    await vi.waitFor(
      async () =>
        expect((await fetch(`${server.url}/whoami`, { headers: { authorization: `Bearer ${TOKEN_A}` } })).status).toBe(
          401,
        ),
      { timeout: 10_000, interval: 50 },
    );
    fs.writeFileSync(tokenFile, `${TOKEN_B}\n`);
    const later = new Date(Date.now() + 5_000);
    fs.utimesSync(tokenFile, later, later);
    offsetMs = 1_001; // past the once-a-second look at the file
    await expect(client.call('dep', boom)).rejects.toThrow('boom');
    await client.close();
    expect(client.stats()).toMatchObject({ outcomesAcknowledged: 2, outcomesRejected: 0 });
    expect((await get(`${server.url}/circuits/dep`)).failure_count).toBe(2);
  });
});

describe('token sources', () => {
  it('looks at a token file at most once per second, and reads it again only when it changed', () => {
    const file = path.join(tempDir(), 'token');
    fs.writeFileSync(file, 'one\n');
    let now = 0;
    const headers = authHeaders(undefined, file, () => now);
    expect(headers()).toEqual({ authorization: 'Bearer one' });
    fs.writeFileSync(file, 'two');
    fs.utimesSync(file, new Date(Date.now() + 5_000), new Date(Date.now() + 5_000));
    now = 999;
    expect(headers()).toEqual({ authorization: 'Bearer one' });
    now = 1_000;
    expect(headers()).toEqual({ authorization: 'Bearer two' });
    fs.rmSync(file);
    now = 5_000;
    expect(headers()).toEqual({ authorization: 'Bearer two' }); // gone for a moment: the last token read
    expect(() => authHeaders(undefined, file)).toThrow(/ENOENT/);
    expect(() => authHeaders('x', file)).toThrow(TypeError);
  });

  it('asks a sync or async provider each time, and sends no header without a token', async () => {
    let n = 0;
    expect(authHeaders(() => `t${++n}`, undefined)()).toEqual({ authorization: 'Bearer t1' });
    expect(await authHeaders(async () => 'a', undefined)()).toEqual({ authorization: 'Bearer a' });
    expect(authHeaders(undefined, undefined)()).toEqual({});
  });
});
