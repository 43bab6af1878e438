import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { swaggerUI } from '@hono/swagger-ui';
import type { OpenAPIHono } from '@hono/zod-openapi';
import { AppError } from '../domain/errors.js';

const require = createRequire(import.meta.url);
const DIST_VERSION = (require('swagger-ui-dist/package.json') as { version: string }).version;
/** The only files the page loads; anything else under /docs is a 404. */
const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
};

/**
 * Swagger UI at /docs, its assets served by the service itself from the pinned
 * `swagger-ui-dist` package: the page works without internet, and the version in the
 * asset path lets browsers cache them for good.
 */
export function registerDocsPage(app: OpenAPIHono, openapiPath: string): void {
  const cache = new Map<string, Buffer>();
  app.get('/docs', swaggerUI({ url: openapiPath, baseUrl: '/docs', version: DIST_VERSION, title: 'circuitlog API' }));
  // A param, not the literal `swagger-ui-dist@5.x`: in a route, '@' and a digit break Hono's
  // RegExpRouter (it marks routes with '@<index>' internally), failing every other request.
  app.get('/docs/:dist/:file', (c) => {
    const file = c.req.param('file');
    const type = ASSETS[file];
    if (type === undefined || c.req.param('dist') !== `swagger-ui-dist@${DIST_VERSION}`)
      throw new AppError('NOT_FOUND', `No documentation asset '${file}'.`);
    let body = cache.get(file);
    if (body === undefined) {
      body = readFileSync(require.resolve(`swagger-ui-dist/${file}`)); // read once, on first use
      cache.set(file, body);
    }
    return c.body(new Uint8Array(body), 200, {
      'content-type': type,
      'cache-control': 'public, max-age=31536000, immutable',
    });
  });
}
