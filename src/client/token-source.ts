/**
 * Where the client's bearer token comes from (issue 30): a fixed string, a provider function
 * (sync or async, asked before each request: cache in it if asking is costly), or a file
 * re-read when it changes (a Kubernetes projected service-account token, rotated on disk):
 * its modification time is looked at, at most once per second, and the file read again only
 * when that changed. A file that cannot be read later keeps the last token read.
 */

import { readFileSync, statSync } from 'node:fs';

/** A token provider: called before each request to circuitlog. */
export type TokenProvider = () => string | Promise<string>;

/** The `Authorization` header to send, or none; a promise only for an async provider. */
export type AuthHeaders = () => Record<string, string> | Promise<Record<string, string>>;

const NONE: Record<string, string> = Object.freeze({}) as Record<string, string>;

const bearer = (token: string): Record<string, string> => (token === '' ? NONE : { authorization: `Bearer ${token}` });

/** How often a token file's modification time is looked at, at most. */
export const TOKEN_FILE_CHECK_MS = 1_000; // 1 s

/** The headers of a fixed token, a provider, or a token file (read once now: a missing file throws). */
export function authHeaders(
  token: string | TokenProvider | undefined,
  tokenFile: string | undefined,
  clock: () => number = Date.now,
): AuthHeaders {
  if (token !== undefined && tokenFile !== undefined) throw new TypeError('Give token or tokenFile, not both');
  if (tokenFile !== undefined) return fileHeaders(tokenFile, clock);
  if (typeof token === 'function') {
    return () => {
      const given = token();
      return typeof given === 'string' ? bearer(given) : given.then(bearer);
    };
  }
  if (token !== undefined && typeof token !== 'string') throw new TypeError('token must be a string or a function');
  const fixed = token === undefined ? NONE : bearer(token);
  return () => fixed;
}

function fileHeaders(file: string, clock: () => number): AuthHeaders {
  const read = (): { mtimeMs: number; headers: Record<string, string> } => {
    const { mtimeMs } = statSync(file);
    return { mtimeMs, headers: bearer(readFileSync(file, 'utf8').trim()) };
  };
  let current = read(); // a file that is not there at start is a configuration error: thrown
  let checkedAt = clock();
  return () => {
    const now = clock();
    if (now - checkedAt < TOKEN_FILE_CHECK_MS) return current.headers;
    checkedAt = now;
    try {
      if (statSync(file).mtimeMs !== current.mtimeMs) current = read();
    } catch {
      // Being replaced, or gone for a moment: the last token read is still the best guess.
    }
    return current.headers;
  };
}
