import type { OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import type { Logger } from 'pino';
import { AppError } from '../domain/errors.js';
import { type RefusalReason, refusalReason } from '../auth/refusal.js';
import { problemParts } from './problem.js';
import { ClientClosedError } from './route-kit.js';
import { logFailure, toAppError } from './request-failure.js';
import { dotSegmentProblem, type ProblemAnswer } from './request-guard.js';
import { contextRequestId } from '../request-id.js';

/**
 * The app's one `notFound` and one `onError`: a path no route answers is a 400 (dot
 * segments), a 405 with `Allow` (a known path, another method) or a 404; every error becomes
 * a problem+json answer and its `request_failed` log line. Register after every route.
 */
export function registerFallbacks(
  app: OpenAPIHono,
  logger: Logger,
  clock: () => number,
  onRefusal?: (reason: RefusalReason) => void,
): void {
  const answer = problemAnswer(logger, clock, onRefusal);
  const render = (c: Context, error: AppError): Response =>
    answer(c.req.method, c.req.path, error, contextRequestId(c));
  const allowedMethods = methodIndex(app);
  app.notFound((c) => {
    const dots = dotSegmentProblem(c.req.path);
    if (dots) return render(c, dots);
    const allow = allowedMethods(c.req.path);
    if (allow.length > 0 && !allow.includes(c.req.method)) {
      return render(
        c,
        new AppError('METHOD_NOT_ALLOWED', `${c.req.method} is not allowed here.`, {
          headers: { allow: allow.join(', ') },
        }),
      );
    }
    return render(c, new AppError('NOT_FOUND', `No route for ${c.req.method} ${c.req.path}.${slashHint(c.req.path)}`));
  });
  app.onError((error, c) => {
    if (error instanceof ClientClosedError) {
      // nginx's 499: the caller went away; nobody reads this answer and nothing failed here.
      logger.debug(
        {
          event: 'client_closed',
          method: c.req.method,
          path: c.req.path,
          status: 499,
          request_id: contextRequestId(c),
        },
        'caller closed the connection',
      );
      return new Response(null, { status: 499 });
    }
    return render(c, toAppError(error));
  });
}

/**
 * An error's answer: its `request_failed` log line and the problem+json Response (`instance`:
 * the path); an auth refusal is counted by its reason (`onRefusal`, the metric).
 */
export function problemAnswer(
  logger: Logger,
  clock: () => number,
  onRefusal?: (reason: RefusalReason) => void,
): ProblemAnswer {
  return (method, path, error, requestId) => {
    if (onRefusal !== undefined) {
      const reason = refusalReason(error);
      if (reason !== null) onRefusal(reason);
    }
    logFailure(logger, method, path, error, requestId);
    const { status, headers, body } = problemParts(error, path, requestId, clock());
    return new Response(body, { status, headers });
  };
}

/** Under /circuits, the likely cause of a 404: a name whose '/' was sent as is. */
function slashHint(path: string): string {
  if (!path.startsWith('/circuits/')) return '';
  return " A '/' in a circuit name is sent as %2F: the circuit a/b is /circuits/a%2Fb.";
}

/** For a path, the methods that some registered route answers (for 405 and `Allow`). */
function methodIndex(app: OpenAPIHono): (path: string) => string[] {
  let routes: { pattern: RegExp; method: string }[] | undefined;
  return (path) => {
    routes ??= app.routes
      .filter((r) => r.method !== 'ALL')
      .map((r) => ({
        method: r.method,
        pattern: new RegExp(
          `^${r.path
            .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
            .replace(/\/:[^/]+/g, '/[^/]+')
            .replace(/\/\*$/, '(/.*)?')}$`,
        ),
      }));
    const methods = new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method));
    if (methods.has('GET')) methods.add('HEAD');
    return [...methods].sort();
  };
}
