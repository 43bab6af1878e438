import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { tempDir } from '../server-process.js';
import { cliTlsArgs, registerTlsPort, tlsServerArgs, type TlsFiles } from './tls.js';

const exec = promisify(execFile);

/** A real Redis Sentinel (`redis-server <conf> --sentinel`) of the test's own, on a random loopback port. */
export interface Sentinel {
  readonly port: number;
  stop(): Promise<void>;
}

/** `redis-cli` against a loopback port (with the test CA and client certificate if it speaks TLS: test/redis/tls.ts). */
export const cli = async (port: number, ...args: string[]) =>
  (await exec('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...cliTlsArgs(port), ...args])).stdout.trim();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Sentinel timings the failover tests use (also in docs/many-hosts.md). */
export const DOWN_AFTER_MS = 1_000;
export const FAILOVER_TIMEOUT_MS = 3_000;

/**
 * A sentinel watching master `name` at 127.0.0.1:`primaryPort` with quorum 2; resolves once it
 * answers. With `tls`: it listens on TLS only and speaks TLS to the nodes and the other sentinels.
 */
export async function startSentinel(
  name: string,
  primaryPort: number,
  auth: { requirepass?: string; masterPassword?: string; tls?: TlsFiles } = {},
): Promise<Sentinel> {
  const port = await freePort();
  const dir = tempDir('circuitlog-sentinel-');
  const conf = path.join(dir, 'sentinel.conf'); // Sentinel rewrites its own file: it must be writable
  fs.writeFileSync(
    conf,
    [
      ...(auth.tls === undefined ? [`port ${port}`] : tlsConfLines(auth.tls, port)),
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${primaryPort} 2`,
      `sentinel down-after-milliseconds ${name} ${DOWN_AFTER_MS}`,
      `sentinel failover-timeout ${name} ${FAILOVER_TIMEOUT_MS}`,
      `sentinel parallel-syncs ${name} 1`,
      ...(auth.masterPassword === undefined ? [] : [`sentinel auth-pass ${name} ${auth.masterPassword}`]),
      ...(auth.requirepass === undefined ? [] : [`requirepass ${auth.requirepass}`]),
      '',
    ].join('\n'),
  );
  if (auth.tls !== undefined) registerTlsPort(port, auth.tls);
  const child = spawn('redis-server', [conf, '--sentinel', '--loglevel', 'warning'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const ok = await cli(
      port,
      ...(auth.requirepass === undefined ? [] : ['--no-auth-warning', '-a', auth.requirepass]),
      'PING',
    ).then(
      (r) => r === 'PONG',
      () => false,
    );
    if (ok) break;
    if (Date.now() > deadline || child.exitCode !== null) throw new Error('redis-server --sentinel did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    port,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The TLS settings (test/redis/tls.ts) as sentinel.conf lines. */
function tlsConfLines(files: TlsFiles, port: number): string[] {
  const args = tlsServerArgs(files, port);
  const lines: string[] = [];
  for (let i = 0; i + 1 < args.length; i += 2) lines.push(`${args[i]!.slice(2)} ${args[i + 1]}`);
  return lines;
}

/** `SENTINEL master <name>` as a map (num-slaves, num-other-sentinels, ...). */
export async function masterInfo(port: number, name: string): Promise<Map<string, string>> {
  const lines = (await cli(port, 'SENTINEL', 'master', name)).split('\n');
  const info = new Map<string, string>();
  for (let i = 0; i + 1 < lines.length; i += 2) info.set(lines[i]!, lines[i + 1]!);
  return info;
}
