// The Python client (clients/python): its pytest suite against the real server (which the
// suite starts itself from dist/, built by globalSetup), `mypy --strict` on the package, its
// tests and its example, and ruff. `.venv-python/` is made by scripts/provision.mjs (`pretest`);
// without it these tests fail with the command to run, never skip.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const pkg = path.join(root, 'clients', 'python');
const bin = (tool: string) => path.join(root, '.venv-python', 'bin', tool);

/** Run a tool of the venv in clients/python; its output is printed when it fails. */
function run(tool: string, args: string[], timeoutMs: number) {
  if (!fs.existsSync(bin(tool)))
    throw new Error(`${bin(tool)} missing: run \`node scripts/provision.mjs\` (npm test does)`);
  const result = spawnSync(bin(tool), args, {
    cwd: pkg,
    encoding: 'utf8',
    timeout: timeoutMs,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
  });
  if (result.status !== 0)
    process.stderr.write(
      `\n--- ${tool} ${args.join(' ')} (exit ${result.status}, signal ${result.signal})\n${result.stdout}\n${result.stderr}\n`,
    );
  return result;
}

describe('Python client (clients/python)', () => {
  it('passes its pytest suite against the real server, spec vectors included', { timeout: 600_000 }, () => {
    const result = run('pytest', ['-q', '-p', 'no:cacheprovider', 'tests'], 590_000);
    expect(result.status).toBe(0);
    // A suite that collected nothing must not pass here either.
    expect(result.stdout).toMatch(/\b\d{3,} passed\b/);
  });

  it('is clean under mypy --strict: the package, its tests and the example', { timeout: 180_000 }, () => {
    const result = run('mypy', [], 170_000);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('Success: no issues found');
  });

  it('is clean under ruff (lint and format)', { timeout: 60_000 }, () => {
    expect(run('ruff', ['check', 'src', 'tests', 'examples'], 50_000).status).toBe(0);
    expect(run('ruff', ['format', '--check', 'src', 'tests', 'examples'], 50_000).status).toBe(0);
  });
});
