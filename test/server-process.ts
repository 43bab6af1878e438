import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';

export interface ServerProcess {
  readonly url: string;
  readonly port: number;
  readonly child: ChildProcess;
  /** Every JSON log line the server printed so far. */
  readonly logs: Record<string, unknown>[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** SIGKILL the whole process group (primary and workers); needs `detached`. */
  killGroup(): Promise<void>;
  /** Everything the server wrote to stderr so far. */
  stderr(): string;
}

/** A spawned server that died of an uncaught exception or an unhandled rejection. */
export interface Crash {
  readonly pid: number;
  readonly stderr: string;
}

const crashes: Crash[] = [];

/**
 * Node prints its version after the stack of an uncaught exception or unhandled rejection
 * (`Node.js v20...`); circuitlog's own refusals (exit 2) and deliberate exits never do.
 */
const CRASH = /^Node\.js v\d+/m;

/** Count a crash of another spawned process (the edge agent: test/edge/edge-process.ts). */
export function reportCrash(crash: Crash): void {
  crashes.push(crash);
}

/** The crashes seen since the last call (`test/no-crash-setup.ts` fails the test with them). */
export function takeCrashes(): Crash[] {
  return crashes.splice(0);
}

export interface StartOptions {
  readonly timeoutMs?: number;
  /** Own process group, so `killGroup()` can SIGKILL primary and workers at once. */
  readonly detached?: boolean;
  /** What node runs; `['dist/main.js']` unless given (`['dist/cli.js', 'serve']`). */
  readonly args?: readonly string[];
}

/** A fresh temp folder for a test's database and config files. */
export function tempDir(prefix = 'circuitlog-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

/**
 * Start the real server (`node dist/main.js`, built by global-setup) on an ephemeral
 * loopback port and resolve once it logs that it is listening.
 */
export function startServer(env: Record<string, string>, options: StartOptions = {}): Promise<ServerProcess> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const child = spawn(process.execPath, [...(options.args ?? ['dist/main.js'])], {
    detached: options.detached ?? false,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', CIRCUITLOG_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  let reported = false;
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (!reported && CRASH.test(stderr)) {
      reported = true; // a worker may crash and be replaced while the primary lives on: still a bug
      crashes.push({ pid: child.pid!, stderr: stderr.slice(-4_000) });
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start in ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    let listening = false;
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!listening) reject(new Error(`server exited with ${code} before listening; stderr: ${stderr}`));
    });
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (entry.event === 'listening' && typeof entry.port === 'number') {
        clearTimeout(timer);
        listening = true;
        const port = entry.port;
        resolve({
          url: `http://127.0.0.1:${port}`,
          port,
          child,
          logs,
          stop: async (signal = 'SIGTERM') => {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal);
            return exited;
          },
          killGroup: async () => {
            try {
              process.kill(-child.pid!, 'SIGKILL');
            } catch {
              // already gone
            }
            await exited;
          },
          stderr: () => stderr,
        });
      }
    });
  });
}
