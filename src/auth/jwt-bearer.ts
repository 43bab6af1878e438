import type { Authenticator } from './bearer.js';
import type { Identity } from './identity.js';
import { type JwtVerifier, looksLikeJwt } from './jwt.js';

/**
 * An Authenticator that may have to wait: a promise only for a JWT not seen before (its
 * signature is checked, src/auth/jwt.ts); every other answer, a known JWT's included, is
 * synchronous, so `/allowed`'s fast path stays synchronous.
 */
export type PendingAuthenticator = (authorization: string | undefined) => Identity | null | Promise<Identity | null>;

const BEARER = /^Bearer (.+)$/i;

/**
 * The credentials first (the credentials file, CIRCUITLOG_TOKEN; null: none configured), then,
 * for a bearer value that is not one of theirs and has a JWT's shape, `auth.jwt`: from its
 * cache, else verified.
 */
export function withJwt(credentials: Authenticator | null, jwt: JwtVerifier): PendingAuthenticator {
  return (authorization) => {
    const known = credentials === null ? null : credentials(authorization);
    if (known !== null || authorization === undefined) return known;
    const token = BEARER.exec(authorization)?.[1];
    if (token === undefined || !looksLikeJwt(token)) return null;
    const cached = jwt.cached(token);
    return cached !== undefined ? cached : jwt.verify(token);
  };
}
