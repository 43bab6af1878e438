import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

describe('the circuitlog/client package entry', () => {
  it('resolves through package.json exports to the built JavaScript', async () => {
    const { stdout } = await run(process.execPath, [
      '--input-type=module',
      '-e',
      "import('circuitlog/client').then((m) => console.log(Object.keys(m).sort().join(',')))",
    ]);
    expect(stdout.trim()).toBe(
      'CallTimeoutError,CircuitOpenError,CircuitRampingError,CircuitThrottledError,CircuitlogClient,CircuitlogRequestError,CircuitlogUnavailableError,ClientClosedError,DependencyThrottledError,createClient',
    );
  });

  it('types a consumer under strict, inferring results from fn and fallback', async () => {
    const tsc = 'node_modules/typescript/bin/tsc';
    const args = [
      '--noEmit',
      '--strict',
      '--module',
      'NodeNext',
      '--moduleResolution',
      'NodeNext',
      '--target',
      'ES2022',
      '--types',
      'node',
      'test/client/fixtures/consumer.ts',
    ];
    const result = await run(process.execPath, [tsc, ...args]).then(
      () => '',
      (e: { stdout: string }) => e.stdout,
    );
    expect(result).toBe('');
  });
});
