import type { MiddlewareHandler } from 'hono';

/**
 * Every JSON answer ends with a newline, so `curl` output does not run into the shell prompt.
 * Hono's `c.json` is where the app's JSON answers are made (problem documents come from
 * problemParts, memoised circuit answers from schemas.ts, each ending in "\n" too): this
 * makes `c.json` for the request do the same, with the same status, headers and content type.
 */
export const jsonEndsWithNewline: MiddlewareHandler = async (c, next) => {
  const body = c.body.bind(c) as (data: string, arg?: unknown, headers?: Record<string, string>) => Response;
  (c as { json: unknown }).json = (object: unknown, arg?: unknown, headers?: Record<string, string>) =>
    body(`${JSON.stringify(object)}\n`, arg, { ...headers, 'content-type': headers?.['content-type'] ?? 'application/json' });
  await next();
};
