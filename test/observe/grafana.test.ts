import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../server-process.js';
import { buildObservedApp } from './observe-app.js';

const dashboard = JSON.parse(fs.readFileSync('examples/grafana/circuitlog.json', 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
};
const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr));

describe('examples/grafana/circuitlog.json', () => {
  it('queries only metrics that circuitlog exports', async () => {
    const text = await (await buildObservedApp().request('GET', '/metrics')).text();
    const exported = new Set([...text.matchAll(/^# TYPE (\S+)/gm)].map((m) => m[1]));
    const used = new Set(
      exprs.flatMap((e) =>
        [...e.matchAll(/\b((?:circuitlog|process)_[a-z_]+?)(?:_bucket)?\b(?=[{[])/g)].map((m) => m[1]),
      ),
    );
    expect(used.size).toBeGreaterThan(10);
    for (const name of used) expect(exported, name).toContain(name);
  });

  it('has only valid PromQL (each query checked by promtool as a recording rule)', () => {
    const rules = exprs.map(
      (expr, i) =>
        `      - record: circuitlog:grafana_${i}\n        expr: ${JSON.stringify(expr.replaceAll('$job', '.*').replaceAll('$circuit', '.*'))}`,
    );
    const file = path.join(tempDir(), 'grafana-rules.yml');
    fs.writeFileSync(file, `groups:\n  - name: grafana\n    rules:\n${rules.join('\n')}\n`);
    const result = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
    expect(result.error).toBeUndefined();
    expect(`${result.stdout}${result.stderr}`).toContain(`SUCCESS: ${exprs.length} rules found`);
  });
});
