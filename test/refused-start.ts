import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Run `dist/main.js` (loopback, a free port, plus `env`) expecting it to refuse to start;
 * killed, and the test failed, if it has not exited within 10 s. Answers its exit code,
 * stderr and how long it took.
 */
export async function refusedStart(env: Record<string, string>): Promise<{ code: number; stderr: string; ms: number }> {
  const started = Date.now();
  const result = await run(process.execPath, ['dist/main.js'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env },
    timeout: 10_000,
    killSignal: 'SIGKILL',
  }).then(
    () => null,
    (e: { code: number; signal: string | null; stderr: string }) => e,
  );
  if (result === null) throw new Error('the server started');
  if (result.signal) throw new Error(`the server did not stop within 10 s; stderr: ${result.stderr}`);
  return { code: result.code, stderr: result.stderr, ms: Date.now() - started };
}
