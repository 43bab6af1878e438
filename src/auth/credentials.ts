/**
 * The credentials file (issue 30): YAML or JSON, a list of named credentials, each with the
 * SHA-256 of its token (never the token), its scopes and, optionally, the circuit and caller
 * name patterns it is limited to and how many circuits it may create. Parsed with zod; a bad
 * file is one message naming the entry and field.
 */
import { hash } from 'node:crypto';
import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { CALLER_PATTERN } from '../domain/caller.js';
import type { Authenticator } from './bearer.js';
import { defaultCallers, type Identity, isValidPattern, SCOPES, type Scope, TOKEN_IDENTITY } from './identity.js';

const pattern = z
  .string()
  .refine(isValidPattern, { message: "a name pattern: not empty, '*' only as its last character" });

const sha256 = z.string().regex(/^[0-9a-fA-F]{64}$/, 'the hex SHA-256 of the token (64 hex digits)');

/** An entry's token hashes, lower case (one, or several while a token is rotated). */
export function hashesOf(entry: { readonly token_sha256: string | readonly string[] }): string[] {
  return (typeof entry.token_sha256 === 'string' ? [entry.token_sha256] : entry.token_sha256).map((h) =>
    h.toLowerCase(),
  );
}

const entrySchema = z
  .object({
    /** The service's name; also the default caller prefix, so a valid caller id. */
    id: z
      .string()
      .regex(new RegExp(CALLER_PATTERN), "letters, digits, _ . : ~ - and '/', 1 to 128 of them")
      .refine((id) => id !== 'anonymous' && id !== 'token', { message: "'anonymous' and 'token' are reserved" }),
    /**
     * Hex SHA-256 of the token (64 hex digits): `circuitlog token create` prints it. A list (up
     * to 4) while a token is rotated: the old and the new sign in as the same id, one voter.
     */
    token_sha256: z.union([sha256, z.array(sha256).min(1).max(4)]),
    scopes: z.array(z.enum(SCOPES as [Scope, ...Scope[]])).min(1),
    circuits: z.array(pattern).min(1).optional(),
    callers: z.array(pattern).min(1).optional(),
    max_new_circuits: z.number().int().min(0).max(1_000_000).optional(),
  })
  .strict();

export const credentialsFileSchema = z
  .object({ credentials: z.array(entrySchema) })
  .strict()
  .superRefine((file, ctx) => {
    const ids = new Set<string>();
    const hashes = new Set<string>();
    file.credentials.forEach((entry, i) => {
      if (ids.has(entry.id))
        ctx.addIssue({ code: 'custom', path: ['credentials', i, 'id'], message: `'${entry.id}' is listed twice` });
      for (const hash of hashesOf(entry)) {
        if (hashes.has(hash))
          ctx.addIssue({
            code: 'custom',
            path: ['credentials', i, 'token_sha256'],
            message: 'the same token is listed twice',
          });
        hashes.add(hash);
      }
      ids.add(entry.id);
    });
  });

export type CredentialEntry = z.infer<typeof entrySchema>;

/** A credentials file that cannot be used: the message names the file and the first problem. */
export class CredentialsError extends Error {
  override name = 'CredentialsError';
}

/** The entries of a credentials file's text (YAML, of which JSON is a subset), or a CredentialsError naming the problem. */
export function parseCredentials(text: string, source: string): readonly CredentialEntry[] {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new CredentialsError(`${source}: not valid YAML or JSON: ${(error as Error).message.split('\n')[0]}`);
  }
  const parsed = credentialsFileSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const where = issue.path.length === 0 ? '' : `${issue.path.map(String).join('.')}: `;
    throw new CredentialsError(`${source}: ${where}${issue.message}`);
  }
  return parsed.data.credentials;
}

/** The entries of the credentials file at `path` (read synchronously: at start and on a reload). */
export function readCredentials(path: string): readonly CredentialEntry[] {
  return parseCredentials(fs.readFileSync(path, 'utf8'), path);
}

/** The identity a credentials-file entry signs in as. */
export function identityOfEntry(entry: CredentialEntry): Identity {
  return {
    id: entry.id,
    kind: 'credential',
    scopes: new Set(entry.scopes),
    circuits: entry.circuits ?? null,
    callers: entry.callers ?? defaultCallers(entry.id),
    maxNewCircuits: entry.max_new_circuits ?? null,
  };
}

/** The hex SHA-256 of a token, as `token_sha256` holds it. */
export function tokenSha256(token: string): string {
  return hash('sha256', token, 'hex'); // one-shot: about half the time of createHash per request
}

/** The identities by their token's hex SHA-256 (lower case); CIRCUITLOG_TOKEN's as `token`, every scope. */
export type CredentialTable = ReadonlyMap<string, Identity>;

export function credentialTable(entries: readonly CredentialEntry[], token?: string): CredentialTable {
  const table = new Map<string, Identity>();
  for (const entry of entries) {
    const identity = identityOfEntry(entry);
    for (const hash of hashesOf(entry)) table.set(hash, identity);
  }
  if (token !== undefined && token !== '') table.set(tokenSha256(token), TOKEN_IDENTITY);
  return table;
}

const BEARER = /^Bearer (.+)$/i;

/**
 * An Authenticator over a table that may be swapped (a reload): the bearer's SHA-256 is looked
 * up among the hashes. The lookup compares hashes, never the secret itself: a hash lookup leaks
 * at most which bytes of a hash matched, and the hash hides the token.
 */
export function tableAuthenticator(current: () => CredentialTable): Authenticator {
  return (authorization) => {
    if (authorization === undefined) return null;
    const match = BEARER.exec(authorization);
    if (match === null) return null;
    return current().get(tokenSha256(match[1]!)) ?? null;
  };
}
