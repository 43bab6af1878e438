import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * Wall time a refused start may take before it counts as hung. The server's own start
 * deadline is 8 s from when it begins to open the store (`startTimeoutMs`), so it stops within
 * 10 s on a quiet machine; a busy one can spend seconds more just loading Node. A server
 * without the deadline never stops and still fails here.
 */
const HUNG_MS = 25_000; // under the 30 s test timeout

/**
 * Run `dist/main.js` (loopback, a free port, plus `env`) expecting it to refuse to start;
 * killed, and the test failed, if it has not exited within HUNG_MS. Answers its exit code,
 * stderr, stdout (the log) and how long it took.
 */
export async function refusedStart(
  env: Record<string, string>,
): Promise<{ code: number; stderr: string; stdout: string; ms: number }> {
  const started = Date.now();
  const result = await run(process.execPath, ['dist/main.js'], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env },
    timeout: HUNG_MS,
    killSignal: 'SIGKILL',
  }).then(
    () => null,
    (e: { code: number; signal: string | null; stderr: string; stdout: string }) => e,
  );
  if (result === null) throw new Error('the server started');
  if (result.signal) throw new Error(`the server did not stop within ${HUNG_MS / 1000} s; stderr: ${result.stderr}`);
  return { code: result.code, stderr: result.stderr, stdout: result.stdout, ms: Date.now() - started };
}
