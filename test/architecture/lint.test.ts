import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

// `npm test` runs the formatter and linter here (biome.jsonc), so a failure shows Biome's own
// report beside the other test results instead of stopping the run before it starts.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const biome = path.join(root, 'node_modules', '@biomejs', 'biome', 'bin', 'biome');

it('passes `biome ci` (formatting and lint rules of biome.jsonc) on the whole tree', () => {
  const run = spawnSync(process.execPath, [biome, 'ci', '--colors=off', '--max-diagnostics=50', '.'], {
    cwd: root,
    encoding: 'utf8',
  });
  const report = `${run.stdout}${run.stderr}`;
  expect(run.error).toBeUndefined();
  expect(run.status, `biome ci failed (fix with \`npx biome check --write .\`):\n${report}`).toBe(0);
});

it('warns, and still passes, on a file of src/ past 250 lines or a function past 60; tests are not held to it', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-lint-'));
  try {
    fs.copyFileSync(path.join(root, 'biome.jsonc'), path.join(dir, 'biome.jsonc'));
    const longFile = `${Array.from({ length: 260 }, (_, i) => `export const v${i} = ${i};`).join('\n')}\n`;
    const body = Array.from({ length: 70 }, () => '  n += 1;').join('\n');
    const longFunction = `export function count(): number {\n  let n = 0;\n${body}\n  return n;\n}\n`;
    for (const folder of ['src', 'test']) {
      fs.mkdirSync(path.join(dir, folder));
      fs.writeFileSync(path.join(dir, folder, 'long-file.ts'), longFile);
      fs.writeFileSync(path.join(dir, folder, 'long-function.ts'), longFunction);
    }
    const run = spawnSync(process.execPath, [biome, 'ci', '--colors=off', '--vcs-enabled=false', '.'], {
      cwd: dir,
      encoding: 'utf8',
    });
    const report = `${run.stdout}${run.stderr}`;
    expect(run.status, report).toBe(0);
    const found = report
      .split('\n')
      .filter((line) => / lint\/\w+\/noExcessive/.test(line))
      .map((line) =>
        line
          .split(/\s+/)
          .slice(0, 2)
          .join(' ')
          .replace(/:\d+:\d+/, ''),
      );
    expect(found.sort()).toEqual([
      'src/long-file.ts lint/style/noExcessiveLinesPerFile',
      'src/long-function.ts lint/complexity/noExcessiveLinesPerFunction',
    ]);
    expect(report).toMatch(/Found 2 warnings/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
