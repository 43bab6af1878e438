import type { Authenticator } from './bearer.js';
import type { Identity } from './identity.js';
import { type JwtVerifier, looksLikeJwt } from './jwt.js';

/**
 * An Authenticator that may have to wait: a promise only for a JWT not seen before (its
 * signature is checked, src/auth/jwt.ts); every other answer, a known JWT's included, is
 * synchronous, so `/allowed`'s fast path stays synchronous.
 */
export type PendingAuthenticator = (authorization: string | undefined) => Identity | null | Promise<Identity | null>;

/**
 * The credentials first (the credentials file, CIRCUITLOG_TOKEN; null: none configured), then
 * `auth.jwt` for a bearer value none of them claims: from its cache, else, when the value has
 * a JWT's shape, verified. The shape is checked only before a verification: a known token
 * costs its hash and one lookup, no scan of its 1 KB by a regular expression.
 */
export function withJwt(credentials: Authenticator | null, jwt: JwtVerifier): PendingAuthenticator {
  return (authorization) => {
    const known = credentials === null ? null : credentials(authorization);
    if (known !== null || authorization === undefined) return known;
    const token = bearerToken(authorization);
    if (token === null) return null;
    const cached = jwt.cached(token);
    if (cached !== undefined) return cached;
    return looksLikeJwt(token) ? jwt.verify(token) : null;
  };
}

/** The value of `Bearer <value>` (the scheme in any case, RFC 9110 section 11.1), else null. */
function bearerToken(authorization: string): string | null {
  if (authorization.length <= BEARER.length || authorization.charCodeAt(BEARER.length - 1) !== 0x20) return null;
  return authorization.slice(0, BEARER.length - 1).toLowerCase() === 'bearer'
    ? authorization.slice(BEARER.length)
    : null;
}

const BEARER = 'Bearer ';
