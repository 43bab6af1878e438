import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const stops: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

/** Start examples/flaky-service.mjs and resolve with its port once it listens. */
function startExample(env: Record<string, string>): Promise<{ port: number; stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, ['--import', './examples/use-repo-client.mjs', 'examples/flaky-service.mjs'], {
    env: { ...process.env, PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    return exited;
  };
  stops.push(stop);
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`example exited with ${code}`)));
    readline.createInterface({ input: child.stdout }).on('line', (line) => {
      const entry = JSON.parse(line) as { event?: string; port?: number };
      if (entry.event === 'listening') resolve({ port: entry.port!, stop });
    });
  });
}

describe('examples/flaky-service.mjs', () => {
  it('answers every request from users-api or its cache, and its outcomes reach circuitlog', async () => {
    const server: ServerProcess = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
    stops.push(() => server.stop('SIGKILL'));
    const example = await startExample({ CIRCUITLOG_URL: server.url, FAILURE_RATE: '0', SLOW_RATE: '0' });
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`http://127.0.0.1:${example.port}/users/7`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ user: { id: '7' }, source: 'users-api' });
    }
    expect(await example.stop()).toBe(0); // close() delivered every outcome
    const circuit = (await (await fetch(`${server.url}/circuits/users-api%2Fget`)).json()) as Record<string, unknown>;
    expect(circuit).toMatchObject({ state: 'closed', failure_count: 0 });
  });

  it('stops calling a failing users-api once the shared circuit opens', async () => {
    const server: ServerProcess = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
    stops.push(() => server.stop('SIGKILL'));
    const example = await startExample({ CIRCUITLOG_URL: server.url, FAILURE_RATE: '1', SLOW_RATE: '0' });
    for (let i = 0; i < 5; i++) expect((await fetch(`http://127.0.0.1:${example.port}/users/7`)).status).toBe(502); // threshold 5
    await vi.waitFor(
      async () => {
        const res = await fetch(`http://127.0.0.1:${example.port}/users/7`);
        expect(await res.json()).toMatchObject({ error: expect.stringMatching(/Circuit 'users-api\/get' is open/) });
      },
      { timeout: 5_000, interval: 50 },
    );
    const circuit = (await (await fetch(`${server.url}/circuits/users-api%2Fget`)).json()) as Record<string, unknown>;
    expect(circuit.state).toBe('open'); // calls decided within the stream's lag may add a few late failures
    expect(circuit.failure_count).toBeGreaterThanOrEqual(5);
  });
});
