import { spawn } from 'node:child_process';

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run the built command line (`node dist/cli.js`, built by global-setup) to its end. The
 * environment starts without the CIRCUITLOG_ variables of the test run, plus `env`.
 */
export function runCli(args: readonly string[], env: Record<string, string> = {}): Promise<CliResult> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('CIRCUITLOG_')));
  const child = spawn(process.execPath, ['dist/cli.js', ...args], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}
