import { execFileSync } from 'node:child_process';

/** Compile src/ to dist/ (incrementally, as `npm start` does) so end-to-end tests run the real server. */
export default function setup(): void {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-b', 'tsconfig.build.json'], {
    stdio: 'inherit',
  });
}
