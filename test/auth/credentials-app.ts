import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AppDeps } from '../../src/app.js';
import { type CredentialEntry, credentialTable, tableAuthenticator, tokenSha256 } from '../../src/auth/credentials.js';
import type { Scope } from '../../src/auth/identity.js';
import { buildObservedApp } from '../observe/observe-app.js';

/** A credentials-file entry for `token` (its SHA-256, as the file holds it). */
export function entry(
  id: string,
  token: string,
  scopes: Scope[],
  more: Partial<CredentialEntry> = {},
): CredentialEntry {
  return { id, token_sha256: tokenSha256(token), scopes, ...more };
}

/** The token of the test credential that has only `scope`. */
export const scopeToken = (scope: Scope) => `test-token-only-${scope}-0123456789`;

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/**
 * The observed app (metrics, stream, dashboard) with a fake online backup, signing in with the
 * given credentials (and CIRCUITLOG_TOKEN `token`, when given) as the credentials file would.
 */
export function buildCredentialsApp(
  entries: readonly CredentialEntry[],
  options: { token?: string; deps?: Partial<AppDeps> } = {},
) {
  const table = credentialTable(entries, options.token);
  const workDir = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-auth-')), 'backup');
  return buildObservedApp({
    deps: {
      authenticate: tableAuthenticator(() => table),
      backup: { workDir, backup: async (destination: string) => fs.writeFileSync(destination, 'SQLite format 3\0') },
      ...options.deps,
    },
  });
}
