import { execFileSync } from 'node:child_process';

/** Compile src/ to dist/ so end-to-end tests run the real server the way `npm start` does. */
export default function setup(): void {
  execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
}
