// The edge agent as a real process (`node dist/edge.js`, built by global-setup), as
// test/server-process.ts starts the server: on an ephemeral loopback port, resolved once it
// logs `edge_listening`; a crash (Node's footer on stderr) fails the test it happened in.
import { spawn, type ChildProcess } from 'node:child_process';
import readline from 'node:readline';
import { reportCrash } from '../server-process.js';

export interface EdgeProcess {
  readonly url: string;
  readonly port: number;
  readonly syslogPort: number | null;
  readonly child: ChildProcess;
  /** Every JSON log line the agent printed so far. */
  readonly logs: Record<string, unknown>[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  stderr(): string;
}

export interface EdgeOptions {
  /** Extra flags after `--server URL --listen 127.0.0.1:0` (`--config FILE`, `--fail-open false`). */
  readonly args?: readonly string[];
  readonly env?: Record<string, string>;
  readonly timeoutMs?: number;
  /** What node runs: `['dist/edge.js']` unless given (`['dist/cli.js', 'edge']`). */
  readonly command?: readonly string[];
}

const CRASH = /^Node\.js v\d+/m;

/** Start `node dist/edge.js --server <server> --listen 127.0.0.1:0 ...args`. */
export function startEdge(server: string, options: EdgeOptions = {}): Promise<EdgeProcess> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const args = [
    ...(options.command ?? ['dist/edge.js']),
    '--server',
    server,
    '--listen',
    '127.0.0.1:0',
    ...(options.args ?? []),
  ];
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  let stderr = '';
  let reported = false;
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    if (!reported && CRASH.test(stderr)) {
      reported = true;
      reportCrash({ pid: child.pid!, stderr: stderr.slice(-4_000) });
    }
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`edge agent did not start in ${timeoutMs} ms; stderr: ${stderr}`));
    }, timeoutMs);
    let listening = false;
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (!listening) reject(new Error(`edge agent exited with ${code} before listening; stderr: ${stderr}`));
    });
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (entry.event !== 'edge_listening' || typeof entry.port !== 'number') return;
      clearTimeout(timer);
      listening = true;
      const port = entry.port;
      resolve({
        url: `http://127.0.0.1:${port}`,
        port,
        syslogPort: typeof entry.syslog_port === 'number' ? entry.syslog_port : null,
        child,
        logs,
        stop: async (signal = 'SIGTERM') => {
          if (child.exitCode === null && child.signalCode === null) child.kill(signal);
          return exited;
        },
        stderr: () => stderr,
      });
    });
  });
}
