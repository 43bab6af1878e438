import { createHash, timingSafeEqual } from 'node:crypto';
import { AppError } from '../domain/errors.js';

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
 * The bearer-token check for a path and its `Authorization` value: a 401 under TOKEN_PATHS
 * without the token, else null. A constant-time compare (hashing first makes the lengths equal).
 */
export function tokenProblem(token: string): (path: string, authorization: string | undefined) => AppError | null {
  const expected = createHash('sha256').update(token).digest();
  return (path, authorization) => {
    if (!needsToken(path)) return null;
    const match = /^Bearer (.+)$/i.exec(authorization ?? '');
    const given = createHash('sha256')
      .update(match?.[1] ?? '')
      .digest();
    if (match && timingSafeEqual(given, expected)) return null;
    return new AppError('UNAUTHORIZED', 'This route needs Authorization: Bearer <CIRCUITLOG_TOKEN>.', {
      headers: { 'www-authenticate': 'Bearer realm="circuitlog"' },
    });
  };
}
