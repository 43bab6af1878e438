import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';
import { runCli } from './run-cli.js';

// `circuitlog backtest` against the built CLI: through a real server, and from its SQLite file.

const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

/** A server whose circuit 'db' (failure_threshold 3) opened once: 2 failures, a success, 3 failures. */
async function recorded(): Promise<{ server: ServerProcess; db: string; dir: string }> {
  const dir = tempDir();
  const db = path.join(dir, 'db.sqlite');
  const server = await startServer({ CIRCUITLOG_DB: db });
  running.push(server);
  const patch = await fetch(`${server.url}/circuits/db`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ failure_threshold: 3, timeout_seconds: 3_600 }),
  });
  expect(patch.status).toBe(201);
  for (const success of [false, false, true, false, false, false]) {
    const res = await fetch(`${server.url}/circuits/db/outcomes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ success }),
    });
    expect(res.status).toBe(200);
  }
  return { server, db, dir };
}

/** The table's row for a figure: its cells. */
const rowOf = (stdout: string, label: string) =>
  stdout
    .split('\n')
    .find((line) => line.startsWith(label))
    ?.slice(label.length)
    .trim()
    .split(/\s{2,}/);

describe('circuitlog backtest', () => {
  it('prints current vs proposed through the server, and writes the picture with --svg', async () => {
    const { server, dir } = await recorded();
    const policy = path.join(dir, 'proposed.yaml');
    fs.writeFileSync(policy, 'failure_threshold: 10\n');
    const svg = path.join(dir, 'out.svg');
    const run = await runCli(['backtest', 'db', '--policy', policy, '--svg', svg, '--url', server.url]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^db: 6 outcomes, .* \(from its creation\)$/m);
    expect(rowOf(run.stdout, 'openings')).toEqual(['1', '0']);
    expect(rowOf(run.stdout, 'refused calls')).toEqual(['0', '0']);
    expect(rowOf(run.stdout, 'fidelity')).toEqual(['1/1 (1.000)']);
    expect(fs.readFileSync(svg, 'utf8')).toMatch(/^<svg[\s>]/);
  });

  it('reads the history straight from the SQLite file with --db (read-only), the engine in its own process', async () => {
    const { server, db, dir } = await recorded();
    await server.stop(); // a single server holds its file exclusively
    running.splice(0);
    const before = fs.readFileSync(db);
    const policy = path.join(dir, 'proposed.json');
    fs.writeFileSync(policy, '{"failure_threshold": 2}');
    const run = await runCli(['backtest', 'db', '--policy', policy, '--db', db]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(rowOf(run.stdout, 'openings')).toEqual(['1', '1']);
    // The stricter policy opens at the 2nd failure: the 4 outcomes after it are refused.
    expect(rowOf(run.stdout, 'refused calls')).toEqual(['0', '4']);
    expect(rowOf(run.stdout, 'fidelity')).toEqual(['1/1 (1.000)']);
    expect(fs.readFileSync(db).equals(before)).toBe(true);

    const json = await runCli(['backtest', 'db', '--policy', policy, '--db', db, '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ circuit: 'db', outcomes: 6, proposed: { refused_calls: 4 } });
  });

  it('takes the range as --from and --to, ISO 8601 or epoch ms', async () => {
    const { server, dir } = await recorded();
    const policy = path.join(dir, 'proposed.yaml');
    fs.writeFileSync(policy, 'failure_threshold: 10\n');
    const hourAhead = Date.now() + 3_600_000;
    const all = await runCli([
      'backtest',
      'db',
      '--policy',
      policy,
      '--from',
      '0',
      '--to',
      String(hourAhead),
      '--json',
      '--url',
      server.url,
    ]);
    expect(all.code).toBe(0);
    expect(JSON.parse(all.stdout)).toMatchObject({ outcomes: 6, from: 0, to: hourAhead });
    const later = new Date(hourAhead).toISOString();
    const none = await runCli([
      'backtest',
      'db',
      '--policy',
      policy,
      '--from',
      later,
      '--to',
      String(hourAhead + 1),
      '--json',
      '--url',
      server.url,
    ]);
    expect(none.code).toBe(0);
    expect(JSON.parse(none.stdout)).toMatchObject({ outcomes: 0, from: hourAhead, start: 'assumed_closed' });
    const empty = await runCli(['backtest', 'db', '--policy', policy, '--from', later, '--url', server.url]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/answered 422 validation-failed: .*\(from: must be before to/);
  });

  it('ranks a grid', async () => {
    const { server, dir } = await recorded();
    const grid = path.join(dir, 'grid.yaml');
    fs.writeFileSync(grid, 'failure_threshold: [2, 3, 10]\n');
    const run = await runCli(['backtest', 'db', '--grid', grid, '--url', server.url]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^objective: /m);
    expect(run.stdout.match(/failure_threshold=\d+/g)?.sort()).toEqual([
      'failure_threshold=10',
      'failure_threshold=2',
      'failure_threshold=3',
    ]);
  });

  it('exits 2 without a policy, and 1 naming the field of a policy the server refuses', async () => {
    const { server, dir } = await recorded();
    expect((await runCli(['backtest', 'db', '--url', server.url])).code).toBe(2);
    const policy = path.join(dir, 'bad.yaml');
    fs.writeFileSync(policy, 'failure_threshold: 0\n');
    const run = await runCli(['backtest', 'db', '--policy', policy, '--url', server.url]);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/answered 422 validation-failed: .*\(failure_threshold: /);
    const missing = await runCli(['backtest', 'nobody', '--policy', policy, '--url', server.url]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/answered 404 circuit-not-found/);
  });
});
