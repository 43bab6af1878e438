// The Python client (clients/python): its pytest suite against the real server (which the
// suite starts itself from dist/, built by globalSetup), `mypy --strict` on the package, its
// tests and its example, and ruff. `.venv-python/` is made by scripts/provision.mjs (`pretest`);
// without it these tests fail with the command to run, never skip.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const pkg = path.join(root, 'clients', 'python');
const bin = (tool: string) => path.join(root, '.venv-python', 'bin', tool);

/** Run a tool of the venv in clients/python (without blocking the worker: the three run side by side); its output is printed when it fails. */
async function run(tool: string, args: string[], timeoutMs: number) {
  if (!fs.existsSync(bin(tool)))
    throw new Error(`${bin(tool)} missing: run \`node scripts/provision.mjs\` (npm test does)`);
  const child = spawn(bin(tool), args, {
    cwd: pkg,
    timeout: timeoutMs,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const [status, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, sig) => resolve([code, sig]));
  });
  if (status !== 0)
    process.stderr.write(`\n--- ${tool} ${args.join(' ')} (exit ${status}, signal ${signal})\n${stdout}\n${stderr}\n`);
  return { status, stdout, stderr };
}

describe.concurrent('Python client (clients/python)', () => {
  it('passes its pytest suite against the real server, spec vectors included', { timeout: 600_000 }, async () => {
    const result = await run('pytest', ['-q', '-p', 'no:cacheprovider', 'tests'], 590_000);
    expect(result.status).toBe(0);
    // A suite that collected nothing must not pass here either.
    expect(result.stdout).toMatch(/\b\d{3,} passed\b/);
  });

  it('is clean under mypy --strict: the package, its tests and the example', { timeout: 180_000 }, async () => {
    const result = await run('mypy', [], 170_000);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('Success: no issues found');
  });

  it('is clean under ruff (lint and format)', { timeout: 60_000 }, async () => {
    expect((await run('ruff', ['check', 'src', 'tests', 'examples'], 50_000)).status).toBe(0);
    expect((await run('ruff', ['format', '--check', 'src', 'tests', 'examples'], 50_000)).status).toBe(0);
  });
});
