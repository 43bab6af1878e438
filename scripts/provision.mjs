// `npm test` runs this first (the `pretest` script): the system programs that some suites
// need are installed here, or the run stops with the command to run. No suite skips itself
// because a program is missing.
//
// To need another program, add one line to REQUIRED: { command, pkg, why }.

import { spawnSync } from 'node:child_process';

/** System programs the test suite runs, and the Debian package of each. */
export const REQUIRED = [
  { command: 'redis-server', pkg: 'redis-server', why: 'Redis store tests (test/store/redis-store.test.ts, test/e2e/redis-*.test.ts); each starts its own server on a random loopback port' },
  { command: 'chromium', pkg: 'chromium', why: 'dashboard tests in a real browser (test/dashboard/)' },
  { command: 'promtool', pkg: 'prometheus', why: 'alert rule tests (test/observe/alerts.test.ts)' },
];

/** Always installed with the packages above: chromium draws text with these fonts. */
const EXTRA_PACKAGES = ['fonts-liberation'];

const onPath = (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status === 0;

function run(args) {
  process.stderr.write(`provision: ${args.join(' ')}\n`);
  const result = spawnSync(args[0], args.slice(1), {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return result.status === 0;
}

function main() {
  const missing = REQUIRED.filter((r) => !onPath(r.command));
  if (missing.length === 0) return 0;
  const pkgs = [...new Set(missing.map((r) => r.pkg)), ...EXTRA_PACKAGES];
  const command = `apt-get update && apt-get install -y --no-install-recommends ${pkgs.join(' ')}`;
  for (const r of missing) process.stderr.write(`provision: '${r.command}' is missing (Debian package ${r.pkg}); needed for ${r.why}\n`);
  const canInstall = process.getuid?.() === 0 && onPath('apt-get');
  // Waits for another apt run on the same machine instead of failing on its lock.
  const lock = ['-o', 'DPkg::Lock::Timeout=600'];
  if (canInstall && run(['apt-get', ...lock, 'update']) && run(['apt-get', ...lock, 'install', '-y', '--no-install-recommends', ...pkgs])) {
    const still = missing.filter((r) => !onPath(r.command));
    if (still.length === 0) return 0;
    process.stderr.write(`provision: still missing after install: ${still.map((r) => r.command).join(', ')}\n`);
    return 1;
  }
  process.stderr.write(
    canInstall
      ? `provision: installing failed; run as root: ${command}\n`
      : `provision: cannot install (needs root and apt-get); run as root: ${command}\n`,
  );
  return 1;
}

process.exitCode = main();
