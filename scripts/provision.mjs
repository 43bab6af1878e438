// `npm test` runs this first (the `pretest` script): the system programs that some suites
// need are installed here, or the run stops with the command to run. No suite skips itself
// because a program is missing.
//
// To need another program, add one line to REQUIRED: { command, pkg, why }. A program is found on
// PATH or in the sbin next to a PATH bin (scripts/find-program.mjs: nginx is in /usr/sbin).
//
// It also makes `.venv-python/` (ignored by git): a virtual environment with the Python client
// (`clients/python`, editable) and its pinned test extras (pytest, mypy, ruff) from the package
// index, which test/client/python.test.ts runs. Reinstalled only when clients/python/pyproject.toml
// changes. Python 3.9+ with `venv` comes from Debian (python3, python3-venv) when missing.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findProgram } from './find-program.mjs';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const VENV = path.join(repoRoot, '.venv-python');
const PYTHON_PACKAGE = path.join(repoRoot, 'clients', 'python');
const PYTHON_DEBIAN = ['python3', 'python3-venv'];

/** System programs the test suite runs, and the Debian package of each. */
export const REQUIRED = [
  {
    command: 'redis-server',
    pkg: 'redis-server',
    why: 'Redis store tests (test/store/redis-store.test.ts, test/e2e/redis-*.test.ts); each starts its own server on a random loopback port',
  },
  {
    command: 'openssl',
    pkg: 'openssl',
    why: 'TLS tests (test/e2e/redis-tls.test.ts) make a throwaway CA and certificates with it (test/redis/tls.ts)',
  },
  { command: 'chromium', pkg: 'chromium', why: 'dashboard tests in a real browser (test/dashboard/)' },
  { command: 'promtool', pkg: 'prometheus', why: 'alert rule tests (test/observe/alerts.test.ts)' },
  {
    command: 'nginx',
    pkg: 'nginx',
    why: 'the gateway tests (test/nginx/, test/e2e/edge-nginx.test.ts), each starting its own nginx on a loopback port (Debian builds it with the auth_request module they use)',
  },
];

/** Always installed with the packages above: chromium draws text with these fonts. */
const EXTRA_PACKAGES = ['fonts-liberation'];

const onPath = (command) => findProgram(command) !== null;

function run(args) {
  process.stderr.write(`provision: ${args.join(' ')}\n`);
  const result = spawnSync(args[0], args.slice(1), {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  return result.status === 0;
}

function systemPrograms() {
  const missing = REQUIRED.filter((r) => !onPath(r.command));
  if (missing.length === 0) return 0;
  const pkgs = [...new Set(missing.map((r) => r.pkg)), ...EXTRA_PACKAGES];
  const command = `apt-get update && apt-get install -y --no-install-recommends ${pkgs.join(' ')}`;
  for (const r of missing)
    process.stderr.write(`provision: '${r.command}' is missing (Debian package ${r.pkg}); needed for ${r.why}\n`);
  const canInstall = process.getuid?.() === 0 && onPath('apt-get');
  // Waits for another apt run on the same machine instead of failing on its lock.
  const lock = ['-o', 'DPkg::Lock::Timeout=600'];
  if (
    canInstall &&
    run(['apt-get', ...lock, 'update']) &&
    run(['apt-get', ...lock, 'install', '-y', '--no-install-recommends', ...pkgs])
  ) {
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

/** python3 that can make a virtual environment (venv with ensurepip), 3.9 or newer. */
function pythonUsable() {
  const check = 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info >= (3, 9) else 3)';
  return onPath('python3') && spawnSync('python3', ['-c', check], { stdio: 'ignore' }).status === 0;
}

function pythonVenv() {
  if (!pythonUsable()) {
    const command = `apt-get update && apt-get install -y --no-install-recommends ${PYTHON_DEBIAN.join(' ')}`;
    process.stderr.write(
      `provision: 'python3' (3.9+, with venv) is missing (Debian packages ${PYTHON_DEBIAN.join(' ')}); needed for the Python client's tests (clients/python, test/client/python.test.ts)\n`,
    );
    const canInstall = process.getuid?.() === 0 && onPath('apt-get');
    const lock = ['-o', 'DPkg::Lock::Timeout=600'];
    if (
      !(
        canInstall &&
        run(['apt-get', ...lock, 'update']) &&
        run(['apt-get', ...lock, 'install', '-y', '--no-install-recommends', ...PYTHON_DEBIAN]) &&
        pythonUsable()
      )
    ) {
      process.stderr.write(
        `provision: ${canInstall ? 'installing failed' : 'cannot install (needs root and apt-get)'}; run as root: ${command}\n`,
      );
      return 1;
    }
  }
  const python = path.join(VENV, 'bin', 'python');
  if (!fs.existsSync(python) && !run(['python3', '-m', 'venv', VENV])) {
    process.stderr.write(`provision: could not create ${VENV}; run: python3 -m venv .venv-python\n`);
    return 1;
  }
  const stampFile = path.join(VENV, '.circuitlog-provisioned');
  const stamp = createHash('sha256')
    .update(fs.readFileSync(path.join(PYTHON_PACKAGE, 'pyproject.toml')))
    .digest('hex');
  if (fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stamp) return 0;
  // One quick retry per index lookup: an index that cannot be reached fails in seconds, not minutes.
  const env = { ...process.env, PIP_RETRIES: process.env.PIP_RETRIES ?? '1', PIP_DISABLE_PIP_VERSION_CHECK: '1' };
  const args = [python, '-m', 'pip', 'install', '--quiet', '--editable', `${PYTHON_PACKAGE}[test]`];
  process.stderr.write(`provision: ${args.join(' ')}\n`);
  const result = spawnSync(args[0], args.slice(1), { stdio: ['ignore', 'inherit', 'inherit'], env });
  if (result.status !== 0) {
    process.stderr.write(
      `provision: installing the Python client failed; run: .venv-python/bin/python -m pip install -e './clients/python[test]'\n`,
    );
    return 1;
  }
  fs.writeFileSync(stampFile, stamp);
  return 0;
}

function main() {
  const programs = systemPrograms();
  const python = pythonVenv();
  return programs || python;
}

process.exitCode = main();
