import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import { AppError } from '../domain/errors.js';

/**
 * Every path that needs `Authorization: Bearer <CIRCUITLOG_TOKEN>` when a token is set, as Hono
 * patterns (`/x/*` is every path under `/x/`). The middleware (`guardTokenPaths`) and the
 * OpenAPI document (`needsToken`) both read this list; /health, /proxy and the docs stay open.
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

/** Whether a request path or an OpenAPI path template (`/circuits/{name}`) is under TOKEN_PATHS. */
export function needsToken(path: string): boolean {
  return TOKEN_PATHS.some((pattern) =>
    pattern.endsWith('/*') ? path.startsWith(pattern.slice(0, -1)) : path === pattern,
  );
}

/** Bearer-token check with a constant-time compare (hashing first makes the lengths equal). */
export function requireToken(token: string): MiddlewareHandler {
  const expected = createHash('sha256').update(token).digest();
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer (.+)$/i.exec(header);
    const given = createHash('sha256')
      .update(match?.[1] ?? '')
      .digest();
    if (!match || !timingSafeEqual(given, expected)) {
      throw new AppError('UNAUTHORIZED', 'This route needs Authorization: Bearer <CIRCUITLOG_TOKEN>.', {
        headers: { 'www-authenticate': 'Bearer realm="circuitlog"' },
      });
    }
    await next();
  };
}

/** With a token set, put `requireToken` in front of every TOKEN_PATHS pattern. */
export function guardTokenPaths(
  app: { use(path: string, handler: MiddlewareHandler): unknown },
  token: string | undefined,
): void {
  if (!token) return;
  const check = requireToken(token);
  for (const path of TOKEN_PATHS) app.use(path, check);
}
