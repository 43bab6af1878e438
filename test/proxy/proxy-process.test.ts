import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { proxyYaml, startNodes, type FakeNode } from './fake-node.js';

const TOKEN = 'proxy-e2e-token-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };
let nodes: Record<string, FakeNode> = {};
const servers: ServerProcess[] = [];

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop('SIGKILL')));
  await Promise.all(Object.values(nodes).map((n) => n.stop()));
});

async function launch(extra: string, dir = tempDir()) {
  const configPath = path.join(dir, 'proxy.yaml');
  fs.writeFileSync(configPath, proxyYaml(nodes, extra));
  const server = await startServer({
    CIRCUITLOG_CONFIG: configPath,
    CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
    CIRCUITLOG_TOKEN: TOKEN,
  });
  servers.push(server);
  return { server, dir };
}

async function dcOf(server: ServerProcess, p = '/proxy/users/x') {
  const res = await fetch(`${server.url}${p}`);
  await res.text();
  return { status: res.status, dc: res.headers.get('x-dc') };
}

async function circuit(server: ServerProcess, name: string) {
  const res = await fetch(`${server.url}/circuits/${encodeURIComponent(name)}`, { headers: auth });
  return (await res.json()) as { state: string };
}

/** Poll `probe` every 50 ms until it returns true or `deadlineMs` passes. */
async function eventually(probe: () => Promise<boolean>, deadlineMs: number): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < deadlineMs) {
    if (await probe()) return Date.now() - started;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`not within ${deadlineMs} ms`);
}

describe('proxy in the real process', () => {
  it('fails over to dc2 without client errors and comes back within timeout_seconds plus an interval', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2', 'dc2-1');
    const { server } = await launch(
      'failure_threshold: 2\ntimeout_seconds: 1\nrequest_timeout_ms: 500\nhealth_check: { interval_ms: 100, timeout_ms: 200 }',
    );
    for (let i = 0; i < 4; i++) expect(await dcOf(server)).toEqual({ status: 200, dc: 'dc1' });
    await nodes['dc1-1']!.stop();
    await nodes['dc1-2']!.stop();
    const during = [];
    for (let i = 0; i < 10; i++) during.push(await dcOf(server));
    expect(during).toEqual(Array(10).fill({ status: 200, dc: 'dc2' }));
    await nodes['dc1-1']!.start();
    await nodes['dc1-2']!.start();
    const tookMs = await eventually(async () => (await dcOf(server)).dc === 'dc1', 1_000 + 100 + 1_000);
    expect(tookMs).toBeLessThan(2_100);
  });

  it('opens a dead node by health checks alone, and keeps it open across a SIGKILL restart', async () => {
    nodes = await startNodes('dc1-1', 'dc1-2', 'dc2-1');
    await nodes['dc1-2']!.stop();
    const extra = 'failure_threshold: 2\ntimeout_seconds: 60\nhealth_check: { interval_ms: 100, timeout_ms: 200 }';
    const { server, dir } = await launch(extra);
    await eventually(async () => (await circuit(server, 'users/dc1-2')).state === 'open', 2_000);
    const list = (await (await fetch(`${server.url}/circuits`, { headers: auth })).json()) as {
      circuits: { name: string; state: string }[];
    };
    expect(list.circuits.find((c) => c.name === 'users/dc1-2')?.state).toBe('open');
    expect(await server.stop('SIGKILL')).toBeNull();

    await nodes['dc1-2']!.start(); // back on its port, but its circuit is still open
    const { server: again } = await launch(extra, dir);
    expect((await circuit(again, 'users/dc1-2')).state).toBe('open');
    for (let i = 0; i < 4; i++) await dcOf(again);
    expect(nodes['dc1-2']!.hits).toBe(0);

    const reset = await fetch(`${again.url}/circuits/${encodeURIComponent('users/dc1-2')}/reset`, {
      method: 'POST',
      headers: auth,
    });
    expect(reset.status).toBe(200);
    for (let i = 0; i < 4; i++) await dcOf(again);
    expect(nodes['dc1-2']!.hits).toBeGreaterThan(0);
  });

  it('answers a fast 503 with Retry-After when every node is down', async () => {
    nodes = await startNodes('dc1-1', 'dc2-1');
    await Promise.all(Object.values(nodes).map((n) => n.stop()));
    const { server } = await launch(
      'failure_threshold: 1\ntimeout_seconds: 30\nhealth_check: { interval_ms: 100, timeout_ms: 200 }',
    );
    await eventually(async () => (await circuit(server, 'users/dc2-1')).state === 'open', 2_000);
    await eventually(async () => (await circuit(server, 'users/dc1-1')).state === 'open', 2_000);
    const started = Date.now();
    const res = await fetch(`${server.url}/proxy/users/x`);
    expect(res.status).toBe(503);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(25);
    expect(Date.now() - started).toBeLessThan(200);
  });

  it('refuses to start on an invalid upstream key, naming it', async () => {
    nodes = await startNodes('dc1-1');
    await expect(launch('retries: -1')).rejects.toThrow(/upstreams\.users\.retries/);
  });
});
