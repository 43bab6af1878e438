import { hash, timingSafeEqual } from 'node:crypto';
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
  '/whoami',
  '/audit',
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
  const expected = hash('sha256', token, 'buffer');
  return (authorization) => {
    const match = /^Bearer (.+)$/i.exec(authorization ?? '');
    // One-shot `crypto.hash`: about half the time of createHash().update().digest() per request.
    const given = hash('sha256', match?.[1] ?? '', 'buffer');
    return match && timingSafeEqual(given, expected) ? TOKEN_IDENTITY : null;
  };
}

/** The 401 for a missing or refused credential (RFC 6750), never saying which part was wrong. */
export function unauthorized(reason: 'missing' | 'invalid' = 'invalid'): AppError {
  return unauthorizedFor(reason);
}
