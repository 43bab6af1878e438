import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { identityOfEntry, parseCredentials } from '../../src/auth/credentials.js';
import { runCli } from './run-cli.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('circuitlog token create', () => {
  it('prints a fresh 256-bit token and the entry that lists its SHA-256, ready to paste', async () => {
    const { code, stdout, stderr } = await runCli([
      'token',
      'create',
      '--id',
      'checkout',
      '--scopes',
      'report,read',
      '--circuits',
      'payments/*',
    ]);
    expect([code, stderr]).toEqual([0, '']);
    const lines = stdout.split('\n');
    const token = lines[1]!;
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/); // 32 bytes, base64url
    const entryText = lines.slice(3).join('\n');
    const [entry] = parseCredentials(`credentials:\n${entryText.replace(/^/gm, '  ')}`, 'pasted');
    expect(entry).toEqual({
      id: 'checkout',
      token_sha256: sha256(token),
      scopes: ['report', 'read'],
      circuits: ['payments/*'],
    });
    expect(identityOfEntry(entry!).circuits).toEqual(['payments/*']);
    expect(stdout.split(token)).toHaveLength(2); // the token once, the file entry holds only its hash
  });

  it('gives a different token each time, and JSON with --json', async () => {
    const runs = await Promise.all(
      [1, 2].map(() =>
        runCli(['token', 'create', '--id', 'a', '--scopes', 'read', '--max-new-circuits', '10', '--json']),
      ),
    );
    const [a, b] = runs.map((r) => JSON.parse(r.stdout) as { token: string; entry: { token_sha256: string } });
    expect(a!.token).not.toBe(b!.token);
    expect(a!.entry).toEqual({ id: 'a', token_sha256: sha256(a!.token), scopes: ['read'], max_new_circuits: 10 });
  });

  it('refuses an unknown scope or a missing id with exit 2 and one line', async () => {
    const scope = await runCli(['token', 'create', '--id', 'a', '--scopes', 'read,fly']);
    expect(scope.code).toBe(2);
    expect(scope.stderr).toMatch(/^circuitlog: --scopes: .+\n$/);
    const id = await runCli(['token', 'create', '--scopes', 'read']);
    expect([id.code, id.stderr]).toEqual([
      2,
      'circuitlog: token create needs --id <id> (the service that will use it)\n',
    ]);
    expect(scope.stdout + id.stdout).toBe('');
  });
});
