import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

// `npm test` runs the formatter and linter here (biome.jsonc), so a failure shows Biome's own
// report beside the other test results instead of stopping the run before it starts.
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

it('passes `biome ci` (formatting and lint rules of biome.jsonc) on the whole tree', () => {
  const biome = path.join(root, 'node_modules', '@biomejs', 'biome', 'bin', 'biome');
  const run = spawnSync(process.execPath, [biome, 'ci', '--colors=off', '--max-diagnostics=50', '.'], {
    cwd: root,
    encoding: 'utf8',
  });
  const report = `${run.stdout}${run.stderr}`;
  expect(run.error).toBeUndefined();
  expect(run.status, `biome ci failed (fix with \`npx biome check --write .\`):\n${report}`).toBe(0);
});
