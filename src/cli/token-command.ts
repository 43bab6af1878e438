/**
 * `circuitlog token create`: a fresh random token (32 random bytes, base64url: 256 bits) and
 * the credentials-file entry that lists it by its SHA-256 (the token itself is never stored;
 * it is printed once, here). The entry is checked as the server checks the file.
 */
import { randomBytes } from 'node:crypto';
import { stringify } from 'yaml';
import { credentialsFileSchema, tokenSha256 } from '../auth/credentials.js';
import type { Invocation } from './args.js';
import { usageError } from './exit-codes.js';
import type { Output } from './output.js';

const TOKEN_BYTES = 32; // 256 bits

const list = (raw: string | undefined) =>
  raw === undefined
    ? undefined
    : raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');

export function createToken(options: Invocation['credential'], json: boolean, io: Output): void {
  if (options.id === undefined) throw usageError('token create needs --id <id> (the service that will use it)');
  if (options.scopes === undefined)
    throw usageError('token create needs --scopes <scope,...> (read, report, operate, configure, admin)');
  const token = randomBytes(TOKEN_BYTES).toString('base64url');
  const max = options.maxNewCircuits;
  if (max !== undefined && !/^\d+$/.test(max)) throw usageError(`--max-new-circuits: a whole number, got '${max}'`);
  const entry = {
    id: options.id,
    token_sha256: tokenSha256(token),
    scopes: list(options.scopes),
    ...(options.circuits === undefined ? {} : { circuits: list(options.circuits) }),
    ...(options.callers === undefined ? {} : { callers: list(options.callers) }),
    ...(max === undefined ? {} : { max_new_circuits: Number(max) }),
  };
  const checked = credentialsFileSchema.safeParse({ credentials: [entry] });
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    const field = issue.path.slice(2).map(String).join('.');
    throw usageError(`--${field.split('.')[0]!.replaceAll('_', '-')}: ${issue.message}`);
  }
  if (json) {
    io.out(`${JSON.stringify({ token, entry })}\n`);
    return;
  }
  io.out(
    `# The token: give it to '${entry.id}' (Authorization: Bearer <token>). It is shown only now and stored nowhere.\n` +
      `${token}\n` +
      '# The entry: paste it under `credentials:` in the credentials file (it holds the SHA-256, not the token).\n' +
      stringify([entry]),
  );
}
