import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { AuditLog } from '../audit/audit-log.js';
import { auditEntryWire } from '../audit/audit-wire.js';
import { AUDIT_ACTIONS } from '../domain/audit-entry.js';
import { json } from './json.js';
import { common, ok, parseQuery, serveRoute } from './route-kit.js';

const DEFAULT_LIMIT = 100;
const MAX_LIMIT = 1_000;

/** A time as ISO 8601 or epoch milliseconds (digits only). */
const timeParam = z
  .string()
  .transform((text, ctx) => {
    const ms = /^\d{1,15}$/.test(text) ? Number(text) : /^\d{4}-\d\d-\d\dT/.test(text) ? Date.parse(text) : Number.NaN;
    if (Number.isFinite(ms)) return ms;
    ctx.addIssue({ code: 'custom', message: 'must be an ISO 8601 time (2026-12-04T03:00:00Z) or epoch milliseconds' });
    return z.NEVER;
  })
  .optional()
  .openapi({
    type: 'string',
    anyOf: [
      { type: 'string', format: 'date-time' },
      { type: 'string', pattern: '^\\d{1,15}$' },
    ],
  });

/** The query of `GET /audit`; `cursor`: what this store's cursors look like. */
export function auditQuerySchema(cursor: RegExp) {
  return z
    .object({
      limit: z
        .string()
        .regex(/^\d+$/, 'must be a whole number')
        .transform(Number)
        .pipe(z.number().int().min(1).max(MAX_LIMIT))
        .optional()
        .openapi({ type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: 'Page size' }),
      before: z
        .string()
        .regex(cursor, 'must be the next_cursor of a previous page')
        .optional()
        .openapi({ description: 'Keyset cursor: the next_cursor of the previous page (older entries)' }),
      circuit: z.string().min(1).max(1_000).optional(),
      who: z.string().min(1).max(256).optional().openapi({ description: 'A credential id, or anonymous' }),
      action: z.enum(AUDIT_ACTIONS).optional(),
      since: timeParam.openapi({ description: 'Entries at or after this time (ISO 8601 or epoch ms)' }),
      until: timeParam.openapi({ description: 'Entries before this time (ISO 8601 or epoch ms)' }),
    })
    .strict();
}

const AuditEntrySchema = z
  .object({
    id: z.string().openapi({ description: 'The entry id; a page cursor' }),
    at: z.string().openapi({ format: 'date-time' }),
    who: z.string().openapi({ description: 'The credential id that made the change; anonymous without credentials' }),
    action: z.enum(AUDIT_ACTIONS),
    circuit: z.string().nullable(),
    before: z.unknown().openapi({ description: 'The values the action changed, before (null: none)' }),
    after: z.unknown().openapi({ description: 'The values the action changed, after (null: none)' }),
    request_id: z.string().nullable(),
    remote: z.string().nullable().openapi({ description: 'The remote address of the request' }),
  })
  .openapi('AuditEntry');

/** `GET /audit` (scope `admin`): the audit log newest first, in pages, filtered. */
export function registerAuditRoutes(app: OpenAPIHono, audit: AuditLog): void {
  const AuditQuerySchema = auditQuerySchema(audit.cursorPattern);
  const route = createRoute({
    method: 'get',
    path: '/audit',
    tags: ['service'],
    summary: 'The audit log: every change a person or service made, newest first, in pages (scope admin)',
    request: { query: AuditQuerySchema },
    responses: {
      200: ok(
        'A page of entries; next_cursor is null on the last page',
        z.object({ entries: z.array(AuditEntrySchema), next_cursor: z.string().nullable() }),
      ),
      ...common,
    },
  });
  serveRoute(app, route, async (c) => {
    const q = parseQuery(c, AuditQuerySchema);
    const page = await audit.page({ ...q, limit: q.limit ?? DEFAULT_LIMIT });
    return json(c, { entries: page.entries.map(auditEntryWire), next_cursor: page.nextCursor }, 200, {
      'cache-control': 'no-store',
    });
  });
}
