import { createHash, timingSafeEqual } from 'node:crypto';
import type { AppError } from '../domain/errors.js';
import { type Identity, TOKEN_IDENTITY } from './identity.js';
import { unauthorizedFor } from './refusal.js';

/**
 * Who a bearer credential is: the `Authorization` value (undefined when absent) to an identity,
 * or null to refuse it (401). Built from CIRCUITLOG_TOKEN (`tokenAuthenticator`, below) or, issue 30,
 * the credentials file and JWTs (src/auth).
 */
export type Authenticator = (authorization: string | undefined) => Identity | null;

/**
 * JWT identities as the request guard asks them (h-jwt's `JwtVerifier`, src/auth/jwt.ts, has
 * this shape): `cached` answers synchronously from the verified tokens (undefined: not known
 * yet, ask `verify`; null: known bad), `verify` checks a token's signature and claims.
 */
export interface JwtLookup {
  cached(token: string): Identity | null | undefined;
  verify(token: string): Promise<Identity | null>;
}

/** Three base64url parts separated by dots: a compact JWS (RFC 7515 section 7.1), worth verifying. */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** The bearer token of an `Authorization` value that looks like a JWT, else null. */
export function jwtOf(authorization: string): string | null {
  const match = /^Bearer (.+)$/i.exec(authorization);
  return match !== null && JWT_SHAPE.test(match[1]!) ? match[1]! : null;
}

/**
 * Every path that needs `Authorization: Bearer <CIRCUITLOG_TOKEN>` when a token is set, as Hono
 * patterns (`/x/*` is `/x` and every path under `/x/`). The request guard (`tokenProblem`) and
 * the OpenAPI document both ask `needsToken`; /health, /proxy and the docs stay open.
 */
export const TOKEN_PATHS = [
  '/circuits',
  '/circuits/*',
  '/outcomes',
  '/metrics',
  '/events/*',
  '/dashboard/api/*',
  '/admin/*',
];

/** Whether a request path or an OpenAPI path template (`/circuits/{name}`) is under TOKEN_PATHS, as Hono matches them. */
export function needsToken(path: string): boolean {
  return TOKEN_PATHS.some((pattern) =>
    pattern.endsWith('/*') ? path === pattern.slice(0, -2) || path.startsWith(pattern.slice(0, -1)) : path === pattern,
  );
}

/**
 * CIRCUITLOG_TOKEN as the one credential (every scope, id `token`): `Bearer <token>`, compared in
 * constant time (hashing first makes the lengths equal).
 */
export function tokenAuthenticator(token: string): Authenticator {
  const expected = createHash('sha256').update(token).digest();
  return (authorization) => {
    const match = /^Bearer (.+)$/i.exec(authorization ?? '');
    const given = createHash('sha256')
      .update(match?.[1] ?? '')
      .digest();
    return match && timingSafeEqual(given, expected) ? TOKEN_IDENTITY : null;
  };
}

/** The 401 for a missing or refused credential (RFC 6750), never saying which part was wrong. */
export function unauthorized(reason: 'missing' | 'invalid' = 'invalid'): AppError {
  return unauthorizedFor(reason);
}
