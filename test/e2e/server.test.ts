import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const run = promisify(execFile);
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop('SIGKILL')));
});

async function start(env: Record<string, string>) {
  const server = await startServer(env);
  running.push(server);
  return server;
}

const post = (url: string, body: unknown) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

describe('real server process', () => {
  it('keeps every acknowledged change across a SIGKILL restart', async () => {
    const db = path.join(tempDir(), 'nested', 'circuitlog.db');
    const first = await start({ CIRCUITLOG_DB: db });
    const acknowledged = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const name = `svc-${i % 8}`;
      const res = await post(`${first.url}/circuits/${name}/outcomes`, { success: false });
      if (res.status === 200) acknowledged.set(name, (acknowledged.get(name) ?? 0) + 1);
    }
    expect(await first.stop('SIGKILL')).toBe(null);

    const second = await start({ CIRCUITLOG_DB: db });
    expect(second.logs.find((l) => l.event === 'migrated')).toBeUndefined();
    for (const [name, count] of acknowledged) {
      const circuit = await (await fetch(`${second.url}/circuits/${name}`)).json();
      expect(circuit.failure_count).toBe(count);
      expect(circuit.state).toBe('open');
    }
    const events = await (await fetch(`${second.url}/circuits/svc-0/events`)).json();
    expect(events.events).toHaveLength(1);
  });

  it('logs one structured line per transition and per failed request', async () => {
    const server = await start({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
    for (let i = 0; i < 5; i++) await post(`${server.url}/circuits/svc/outcomes`, { success: false });
    await post(`${server.url}/circuits/other/outcomes`, { success: true });
    await fetch(`${server.url}/circuits/svc/allowed`); // refused: the transition says it all, no line
    await post(`${server.url}/circuits/svc/outcomes`, { success: 'no' });
    await new Promise((r) => setTimeout(r, 200));
    const transitions = server.logs.filter((l) => l.event === 'transition');
    expect(transitions).toEqual([
      expect.objectContaining({
        circuit: 'svc',
        from: 'closed',
        to: 'open',
        reason: 'failure_threshold_reached',
        failure_count: 5,
        open_until: expect.any(String),
      }),
    ]);
    expect(server.logs.filter((l) => l.event === 'request_failed')).toEqual([
      expect.objectContaining({ status: 422, code: 'VALIDATION_FAILED' }),
    ]);
  });

  it('stops at start with a message naming a bad variable', async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ PORT: 'eighty' }, /PORT/],
      [{ CIRCUITLOG_CONFIG: '/nonexistent/circuitlog.yaml' }, /CIRCUITLOG_CONFIG/],
      [{ CIRCUITLOG_TOKEN: 'short' }, /CIRCUITLOG_TOKEN/],
    ];
    const dir = tempDir();
    const bad = path.join(dir, 'bad.yaml');
    fs.writeFileSync(bad, 'circuit_defaults:\n  failure_threshold: 0\n');
    cases.push([{ CIRCUITLOG_CONFIG: bad }, /circuit_defaults\.failure_threshold/]);
    for (const [env, message] of cases) {
      const error = await run(process.execPath, ['dist/main.js'], {
        env: { ...process.env, CIRCUITLOG_DB: path.join(dir, 'db'), ...env },
      }).then(
        () => null,
        (e: { code: number; stderr: string }) => e,
      );
      expect(error?.code).toBe(2);
      expect(error?.stderr).toMatch(message);
    }
  });

  it('uses circuit defaults from the config file and requires the token when set', async () => {
    const dir = tempDir();
    fs.writeFileSync(path.join(dir, 'c.yaml'), 'circuit_defaults:\n  failure_threshold: 2\n  timeout_seconds: 9\n');
    const server = await start({
      CIRCUITLOG_DB: path.join(dir, 'db'),
      CIRCUITLOG_CONFIG: path.join(dir, 'c.yaml'),
      CIRCUITLOG_TOKEN: 'token-0123456789abcdef',
    });
    expect((await fetch(`${server.url}/circuits`)).status).toBe(401);
    const res = await fetch(`${server.url}/circuits/svc/failure`, {
      method: 'POST',
      headers: { authorization: 'Bearer token-0123456789abcdef' },
    });
    expect(await res.json()).toMatchObject({ failure_threshold: 2, timeout_seconds: 9 });
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });

  it('refuses to start a second single-worker server on the same file, naming CIRCUITLOG_DB', async () => {
    const db = path.join(tempDir(), 'db.sqlite');
    await start({ CIRCUITLOG_DB: db });
    const error = await run(process.execPath, ['dist/main.js'], {
      env: { ...process.env, PORT: '0', CIRCUITLOG_DB: db },
    }).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    );
    expect(error?.code).toBe(2);
    expect(error?.stderr).toMatch(/CIRCUITLOG_DB: the database is locked/);
  });
});
