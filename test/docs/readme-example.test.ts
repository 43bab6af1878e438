import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type ServerProcess } from '../server-process.js';

const run = promisify(execFile);
const running: ServerProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((s) => s.stop()));
});

describe("the README's worked example", () => {
  it('runs as written against the real server and prints what its comments say', async () => {
    const readme = fs.readFileSync('README.md', 'utf8');
    const section = readme.slice(readme.indexOf('## Worked example'));
    const script = /```sh\n([\s\S]*?)```/.exec(section)![1]!;
    expect(script).toContain('B=http://127.0.0.1:8080');
    const server = await startServer({ CIRCUITLOG_DB: path.join(tempDir(), 'db.sqlite') });
    running.push(server);
    const { stdout } = await run(
      'bash',
      ['-euo', 'pipefail', '-c', script.replace('B=http://127.0.0.1:8080', `B=${server.url}`)],
      { timeout: 20_000 },
    );
    const lines = stdout.split(/\r?\n/);
    // 1: PATCH creates the circuit; 2: three outcomes, the third opens it; each answer on its own line.
    expect(lines[0]).toMatch(
      /^\{"id":1,"name":"payment-gateway\/charge","state":"closed","failure_count":0,"failure_threshold":3,"timeout_seconds":10/,
    );
    expect(lines[3]).toMatch(/^\{.*"state":"open","failure_count":3,/);
    // 3: /allowed refuses, with the headers shown.
    expect(lines[4]).toBe('HTTP/1.1 503 Service Unavailable');
    expect(lines).toContain('content-type: application/problem+json');
    expect(lines).toContain('retry-after: 10');
    expect(stdout).toMatch(
      /\{"type":"\/problems\/circuit-open",.*"code":"CIRCUIT_OPEN","circuit":"payment-gateway\/charge","state":"open","open_until":"[^"]+"\}\n/,
    );
    // 4: the transition log and the one open gauge.
    expect(stdout).toMatch(
      /\n\{"events":\[\{"from":"closed","to":"open","reason":"failure_threshold_reached","at":"[^"]+"\}\]\}\n/,
    );
    expect(lines.at(-2)).toBe('circuitlog_circuit_state{circuit="payment-gateway/charge",state="open"} 1');
    expect(lines.at(-1)).toBe('');
  });
});
