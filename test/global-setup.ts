import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

/**
 * Compile src/ to dist/ (incrementally, as `npm start` does) so end-to-end tests run the real
 * server, and make the package's bin executable as `npm run build` does: on a fresh clone
 * `npm ci` runs before dist/ exists, so nothing else sets its mode (`npx circuitlog` needs it).
 */
export default function setup(): void {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-b', 'tsconfig.build.json'], {
    stdio: 'inherit',
  });
  fs.chmodSync('dist/cli.js', 0o755);
}
