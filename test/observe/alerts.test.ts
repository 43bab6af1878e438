import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// promtool comes from the Debian package `prometheus`, installed by scripts/provision.mjs
// (npm test's pretest step); a missing promtool fails here, it never skips.
const dir = path.resolve('examples/prometheus');

function promtool(...args: string[]) {
  const result = spawnSync('promtool', args, { cwd: dir, encoding: 'utf8' });
  if (result.error)
    throw new Error(`promtool could not run (${result.error.message}); run: node scripts/provision.mjs`);
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('examples/prometheus/alerts.yml', () => {
  it('passes promtool check rules', () => {
    const { status, output } = promtool('check', 'rules', 'alerts.yml');
    expect(output).toContain('SUCCESS: 6 rules found');
    expect(status).toBe(0);
  });

  it('passes its promtool unit tests (alerts.test.yml)', () => {
    const { status, output } = promtool('test', 'rules', 'alerts.test.yml');
    expect(output).toContain('SUCCESS');
    expect(status).toBe(0);
  });

  it('names only metrics that circuitlog exports', async () => {
    const { buildObservedApp } = await import('./observe-app.js');
    const text = await (await buildObservedApp().request('GET', '/metrics')).text();
    const exported = new Set([...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]));
    const rules = (await import('node:fs')).readFileSync(path.join(dir, 'alerts.yml'), 'utf8');
    const used = new Set([...rules.matchAll(/\b(circuitlog_[a-z_]+)/g)].map((m) => m[1]));
    expect(used.size).toBeGreaterThan(0);
    for (const name of used) expect(exported, name).toContain(name);
  });
});
