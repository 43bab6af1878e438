import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import readline from 'node:readline';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../server-process.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('npm start', () => {
  it('passes SIGTERM to the server, which drains in-flight requests and stops', async () => {
    let arrived = 0;
    const slow = http.createServer((_req, res) => {
      arrived++;
      setTimeout(() => res.end('late but fine'), 800); // answers 800 ms after the request arrives
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    const dir = tempDir();
    const config = path.join(dir, 'c.yaml');
    const nodeUrl = `http://127.0.0.1:${(slow.address() as { port: number }).port}`;
    fs.writeFileSync(
      config,
      `local_dc: dc1\nupstreams:\n  slow:\n    nodes: [{ id: n1, dc: dc1, url: "${nodeUrl}" }]\n    health_check: { enabled: false }\n`,
    );
    // --ignore-scripts skips only `prestart` (the build): global-setup already built dist/.
    const npm = spawn('npm', ['start', '--ignore-scripts', '--silent'], {
      env: {
        ...process.env,
        PORT: '0',
        HOST: '127.0.0.1',
        CIRCUITLOG_DB: path.join(dir, 'db.sqlite'),
        CIRCUITLOG_CONFIG: config,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const npmExit = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    const logs: Record<string, unknown>[] = [];
    let serverPid = 0;
    try {
      const listening = new Promise<Record<string, unknown>>((resolve) => {
        readline.createInterface({ input: npm.stdout! }).on('line', (line) => {
          if (!line.startsWith('{')) return;
          const entry = JSON.parse(line) as Record<string, unknown>;
          logs.push(entry);
          if (entry.event === 'listening') resolve(entry);
        });
      });
      const ready = await listening;
      serverPid = ready.pid as number;
      expect(serverPid).not.toBe(npm.pid);

      const inFlight = fetch(`http://127.0.0.1:${ready.port as number}/proxy/slow/x`);
      for (let i = 0; i < 1_000 && arrived === 0; i++) await new Promise((r) => setTimeout(r, 10)); // at most 10 s
      expect(arrived).toBe(1);
      npm.kill('SIGTERM');
      const answer = await inFlight;
      expect(answer.status).toBe(200);
      expect(await answer.text()).toBe('late but fine');
      expect(await npmExit).toBe(0);
      expect(logs.map((l) => l.event)).toContain('stopped');
      expect(alive(serverPid)).toBe(false);
    } finally {
      if (serverPid && alive(serverPid)) process.kill(serverPid, 'SIGKILL');
      npm.kill('SIGKILL');
      slow.close();
    }
  });
});

/** Modification time of every file under `dir`, by relative path. */
function mtimes(dir: string): Record<string, number> {
  const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
  return Object.fromEntries(
    files.map((e) => [
      path.relative(dir, path.join(e.parentPath, e.name)),
      fs.statSync(path.join(e.parentPath, e.name)).mtimeMs,
    ]),
  );
}

function runPrestart(cwd: string): Promise<number | null> {
  const npm = spawn('npm', ['run', 'prestart', '--silent'], { cwd, stdio: ['ignore', 'inherit', 'inherit'] });
  return new Promise((resolve) => npm.once('exit', (code) => resolve(code)));
}

describe("npm start's build (prestart)", () => {
  it('writes nothing when no source changed (tsc -b: up to date), and rebuilds when one did', async () => {
    // A copy of the project, dist/ included as global-setup built it, timestamps kept.
    const root = tempDir('circuitlog-build-');
    for (const entry of ['src', 'dist', 'migrations', 'package.json', 'tsconfig.json', 'tsconfig.build.json']) {
      fs.cpSync(entry, path.join(root, entry), { recursive: true, preserveTimestamps: true });
    }
    fs.symlinkSync(path.resolve('node_modules'), path.join(root, 'node_modules'));
    const dist = path.join(root, 'dist');
    expect(await runPrestart(root)).toBe(0); // a no-op unless src/ changed since global-setup built dist/
    const before = mtimes(dist);
    expect(await runPrestart(root)).toBe(0);
    expect(mtimes(dist)).toEqual(before); // up to date: not one file written

    const source = path.join(root, 'src', 'config', 'env.ts');
    fs.writeFileSync(
      source,
      fs.readFileSync(source, 'utf8').replace('must be an integer from', 'must be a BUILD_PROBE integer from'),
    );
    expect(await runPrestart(root)).toBe(0);
    expect(fs.readFileSync(path.join(dist, 'config', 'env.js'), 'utf8')).toContain('BUILD_PROBE');
    expect(mtimes(dist)['config/env.js']).toBeGreaterThan(before['config/env.js']!);
  }, 180_000);
});
