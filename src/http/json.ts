import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/**
 * The one way the routes answer JSON (Hono's `c.json` is not used): the JSON text and a
 * newline, so `curl` output ends its line instead of running into the shell prompt. The
 * other JSON bodies end the same way: problem documents (`problemParts`), the memoised
 * circuit answers (`schemas.ts`) and the OpenAPI document. A Hono middleware could do this
 * for every route, but any middleware makes the synchronous `GET /allowed` path asynchronous
 * (it measured at half the throughput), so it is done where the text is made.
 */
export function json(
  c: Context,
  value: unknown,
  status: ContentfulStatusCode = 200,
  headers: Record<string, string> = {},
): Response {
  return c.body(`${JSON.stringify(value)}\n`, status, { ...headers, 'content-type': 'application/json' });
}
