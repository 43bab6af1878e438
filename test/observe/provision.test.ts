import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { findProgram, searchDirs } from '../../scripts/find-program.mjs';

describe('scripts/provision.mjs (npm pretest)', () => {
  it('passes when every required program is installed', () => {
    const result = spawnSync(process.execPath, ['scripts/provision.mjs'], { encoding: 'utf8' });
    expect(result.status).toBe(0);
  });

  it('fails, naming the programs and the command to run, when it cannot install them', () => {
    // No PATH: nothing is found, and apt-get cannot be run either.
    const result = spawnSync(process.execPath, ['scripts/provision.mjs'], {
      encoding: 'utf8',
      env: { PATH: '/nonexistent' },
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain("'chromium' is missing (Debian package chromium)");
    expect(result.stderr).toContain("'promtool' is missing (Debian package prometheus)");
    expect(result.stderr).toContain("'redis-server' is missing (Debian package redis-server)");
    expect(result.stderr).toContain("'openssl' is missing (Debian package openssl)");
    expect(result.stderr).toContain("'nginx' is missing (Debian package nginx)");
    expect(result.stderr).toContain(
      'apt-get update && apt-get install -y --no-install-recommends redis-server openssl chromium prometheus nginx fonts-liberation',
    );
    expect(result.stderr).toContain("'python3' (3.9+, with venv) is missing (Debian packages python3 python3-venv)");
    expect(result.stderr).toContain(
      'run as root: apt-get update && apt-get install -y --no-install-recommends python3 python3-venv',
    );
  });

  it('finds a program in the sbin next to a PATH bin: nginx in /usr/sbin for a PATH without it', () => {
    // A non-root user's PATH often leaves out /usr/sbin, where Debian puts nginx; `command -v` fails there.
    expect(searchDirs('/usr/local/bin:/usr/bin:/bin')).toEqual([
      '/usr/local/bin',
      '/usr/local/sbin',
      '/usr/bin',
      '/usr/sbin',
      '/bin',
      '/sbin',
    ]);
    expect(findProgram('nginx', '/usr/bin:/bin')).toBe('/usr/sbin/nginx');
    expect(findProgram('nginx', '/nonexistent')).toBeNull();
    expect(findProgram('no-such-program-circuitlog', '/usr/bin:/bin')).toBeNull();
  });
});
