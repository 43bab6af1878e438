import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { runCli } from './run-cli.js';

// The circuit commands against the real server (one, with a token, on a temp database).
const TOKEN = 'cli-token-0123456789';
let server: ServerProcess;
let env: Record<string, string>;

async function post(pathname: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${server.url}${pathname}`, {
    method: 'POST',
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

async function circuit(name: string): Promise<Record<string, unknown> | null> {
  const answer = await fetch(`${server.url}/circuits/${encodeURIComponent(name)}`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  return answer.status === 404 ? null : ((await answer.json()) as Record<string, unknown>);
}

beforeAll(async () => {
  const dir = tempDir();
  server = await startServer({ CIRCUITLOG_DB: path.join(dir, 'db.sqlite'), CIRCUITLOG_TOKEN: TOKEN });
  env = { CIRCUITLOG_URL: server.url, CIRCUITLOG_TOKEN: TOKEN };
});
afterAll(async () => {
  await server?.stop();
});

describe('circuitlog ls', () => {
  it('follows every page: 520 circuits over two pages of 500, with state and failure counts', async () => {
    const outcomes = Array.from({ length: 520 }, (_, i) => ({
      circuit: `ls-${String(i).padStart(3, '0')}`,
      success: true,
    }));
    expect((await post('/outcomes', { outcomes })).status).toBe(200);
    for (let i = 0; i < 5; i++) await post('/circuits/ls-007/failure'); // the default threshold is 5
    const json = await runCli(['ls', '--json'], env);
    expect(json.code).toBe(0);
    const listed = (JSON.parse(json.stdout) as { name: string }[]).filter((c) => c.name.startsWith('ls-'));
    expect(listed.map((c) => c.name)).toEqual(outcomes.map((o) => o.circuit));

    const table = await runCli(['ls'], env);
    expect(table.code).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+STATE\s+FORCED\s+FAILURES\s+WINDOW\s+OPEN UNTIL$/);
    expect(lines.filter((line) => line.startsWith('ls-'))).toHaveLength(520);
    expect(lines.find((line) => line.startsWith('ls-007 '))).toMatch(/^ls-007\s+open\s+-\s+5\/5\s+\S+\s+\d{4}-/);
    expect(lines.find((line) => line.startsWith('ls-008 '))).toMatch(/^ls-008\s+closed\s+-\s+0\/5\s+\S+\s+-$/);
  });

  it('lists by state with --state, and refuses an unknown state with exit 2', async () => {
    await post('/circuits/only-open/failure', { timeout_seconds: 600 });
    for (let i = 0; i < 4; i++) await post('/circuits/only-open/failure');
    const open = await runCli(['ls', '--state', 'open', '--json'], env);
    expect(open.code).toBe(0);
    const names = (JSON.parse(open.stdout) as { name: string; state: string }[]).map((c) => c.state);
    expect(names.length).toBeGreaterThan(0);
    expect(new Set(names)).toEqual(new Set(['open']));
    const bad = await runCli(['ls', '--state', 'ajar'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--state: must be closed, open, half_open, got 'ajar'");
  });
});

describe('circuitlog get, force, clear, reset', () => {
  it('get prints a circuit whose name has a /, sent percent-encoded', async () => {
    await post(`/circuits/${encodeURIComponent('payments/charge')}/failure`);
    const got = await runCli(['get', 'payments/charge', '--json'], env);
    expect(got.code).toBe(0);
    expect(JSON.parse(got.stdout)).toMatchObject({ name: 'payments/charge', failure_count: 1 });
    const text = await runCli(['get', 'payments/charge'], env);
    expect(text.stdout).toMatch(/^failure_count\s+1$/m);
  });

  it('get of an unknown circuit exits 1 with the 404 detail', async () => {
    const got = await runCli(['get', 'never-seen'], env);
    expect(got.code).toBe(1);
    expect(got.stderr).toMatch(/404 circuit-not-found: .*never-seen/);
  });

  it('force open refuses calls, force none and clear remove the force', async () => {
    await post('/circuits/forced/success');
    const forced = await runCli(['force', 'forced', 'open'], env);
    expect(forced.code).toBe(0);
    expect(forced.stdout).toBe('forced: forced open, state closed\n');
    expect(await circuit('forced')).toMatchObject({ forced_state: 'open' });
    expect(
      (await fetch(`${server.url}/circuits/forced/allowed`, { headers: { authorization: `Bearer ${TOKEN}` } })).status,
    ).toBe(503);
    expect((await runCli(['force', 'forced', 'none'], env)).code).toBe(0);
    expect(await circuit('forced')).toMatchObject({ forced_state: null });
    expect((await runCli(['force', 'forced', 'closed'], env)).code).toBe(0);
    expect(await circuit('forced')).toMatchObject({ forced_state: 'closed' });
    const cleared = await runCli(['clear', 'forced', '--json'], env);
    expect(cleared.code).toBe(0);
    expect(JSON.parse(cleared.stdout)).toMatchObject({ name: 'forced', forced_state: null });
  });

  it('clear of an unknown circuit exits 1 and creates nothing', async () => {
    const cleared = await runCli(['clear', 'ghost'], env);
    expect(cleared.code).toBe(1);
    expect(await circuit('ghost')).toBeNull();
  });

  it('force takes only open, closed or none (exit 2, nothing created)', async () => {
    const bad = await runCli(['force', 'typo-force', 'shut'], env);
    expect(bad.code).toBe(2);
    expect(await circuit('typo-force')).toBeNull();
  });

  it('reset closes an open circuit', async () => {
    for (let i = 0; i < 5; i++) await post('/circuits/to-reset/failure');
    expect(await circuit('to-reset')).toMatchObject({ state: 'open' });
    const reset = await runCli(['reset', 'to-reset'], env);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toBe('to-reset: reset, state closed, failures 0\n');
    expect(await circuit('to-reset')).toMatchObject({ state: 'closed', failure_count: 0 });
  });
});

describe('circuitlog exit codes', () => {
  it('a missing or wrong token exits 1 and names --token', async () => {
    const none = await runCli(['ls'], { CIRCUITLOG_URL: server.url });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('401');
    expect(none.stderr).toContain('--token or set CIRCUITLOG_TOKEN');
    const wrong = await runCli(['ls', '--url', server.url, '--token', 'wrong-token-0123456789'], {});
    expect(wrong.code).toBe(1);
  });

  it('--url and --token override the environment', async () => {
    const listed = await runCli(['get', 'payments/charge', '--url', server.url, '--token', TOKEN], {
      CIRCUITLOG_URL: 'http://127.0.0.1:9',
      CIRCUITLOG_TOKEN: 'other-token-0123456789',
    });
    expect(listed.code).toBe(0);
  });

  it('no server at the URL exits 3', async () => {
    const down = await runCli(['ls', '--url', 'http://127.0.0.1:9'], {});
    expect(down.code).toBe(3);
    expect(down.stderr).toContain('cannot reach circuitlog at http://127.0.0.1:9');
  });

  it('a bad command line exits 2: unknown command, unknown option, missing argument, bad name', async () => {
    for (const args of [['bogus'], ['ls', '--nope'], ['get'], ['get', 'a//b'], ['ls', '--url', 'ftp://x']]) {
      const run = await runCli(args, env);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toMatch(/^circuitlog: /);
    }
  });

  it('--help lists every command and exits 0', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    for (const command of ['serve', 'ls', 'get', 'force', 'clear', 'reset', 'backup', 'restore', 'migrate --check'])
      expect(help.stdout).toContain(`  ${command}`);
  });

  it('npx circuitlog runs the package bin from the repository (no install)', () => {
    const npx = spawnSync('npx', ['--no', '--', 'circuitlog', '--help'], { encoding: 'utf8' });
    expect(npx.status, npx.stderr).toBe(0);
    expect(npx.stdout).toMatch(/^usage: circuitlog <command>/);
  });

  it('reads at most 16 MiB of an answer: a larger one exits 1 (a wrong --url cannot fill memory)', async () => {
    const chunk = Buffer.alloc(1024 * 1024, 0x20); // 1 MiB of spaces, valid JSON padding
    const huge = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      let sent = 0;
      const more = () => {
        while (sent < 24 && res.write(chunk)) sent++;
        if (sent < 24) res.once('drain', more);
        else res.end('{}');
      };
      res.on('close', () => res.removeAllListeners('drain'));
      more();
    });
    await new Promise<void>((resolve) => huge.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(huge.address() as AddressInfo).port}`;
      const got = await runCli(['get', 'big', '--url', url]);
      expect(got.code).toBe(1);
      expect(got.stderr).toContain(`answer is over ${16 * 1024 * 1024} bytes`);
    } finally {
      huge.closeAllConnections();
      await new Promise((resolve) => huge.close(resolve));
    }
  });
});
