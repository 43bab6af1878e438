// Builds @circuitlog/client from the repository's own src/client and src/domain (no copy):
// tsc twice, ES modules into dist/esm and CommonJS into dist/cjs, each with its .d.ts, and a
// package.json in each tree saying which module format its .js (and .d.ts) files are.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

rmSync(path.join(here, 'dist'), { recursive: true, force: true });
for (const [format, type] of [
  ['esm', 'module'],
  ['cjs', 'commonjs'],
]) {
  execFileSync(process.execPath, [tsc, '-p', path.join(here, `tsconfig.${format}.json`)], { stdio: 'inherit' });
  mkdirSync(path.join(here, 'dist', format), { recursive: true });
  writeFileSync(path.join(here, 'dist', format, 'package.json'), `${JSON.stringify({ type })}\n`);
}
