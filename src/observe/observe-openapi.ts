import { z, type OpenAPIHono } from '@hono/zod-openapi';
import { CIRCUIT_NAME_MAX_LENGTH } from '../domain/circuit-name.js';
import { SHARDS } from '../store/redis/shards.js';

const problem = (description: string) => ({
  description,
  content: { 'application/problem+json': { schema: z.object({}).passthrough() } },
});
const text = (type: string, description: string) => ({ description, content: { [type]: { schema: z.string() } } });
const unauthorized = { 401: problem('Missing or wrong bearer token (when CIRCUITLOG_TOKEN is set)') };
const notAllowed = { 405: problem('Another method than GET or HEAD; Allow lists them') };

/**
 * Describe /metrics, /events/stream and the dashboard in the OpenAPI document. They are
 * served by plain handlers (text, an event stream, HTML); see docs/observability.md.
 */
export function documentObserveRoutes(app: OpenAPIHono, metrics: boolean, cursorEventIds: boolean): void {
  if (metrics) {
    app.openAPIRegistry.registerPath({
      method: 'get',
      path: '/metrics',
      tags: ['observability'],
      summary: 'Prometheus metrics (text format 0.0.4); absent with metrics.enabled false',
      responses: {
        200: text('text/plain', 'The exposition'),
        ...unauthorized,
        ...notAllowed,
        503: problem('Metrics could not be gathered; Retry-After'),
      },
    });
  }
  documentEventStream(app, cursorEventIds);
  documentDashboard(app);
}

/** /events/stream: the event stream and its Last-Event-ID resumption. */
/** One name or prefix (the circuit name's length: a longer one could match nothing). */
const filter = (description: string) =>
  z.string().min(1).max(CIRCUIT_NAME_MAX_LENGTH).optional().openapi({ description });

function documentEventStream(app: OpenAPIHono, cursorEventIds: boolean): void {
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/events/stream',
    tags: ['observability'],
    summary: 'Server-Sent Events: one `transition` event per state change; Last-Event-ID replays',
    request: {
      query: z.object({
        circuit: filter('Only this circuit; not with prefix'),
        prefix: filter('Only circuits whose name starts with this; not with circuit'),
        audit: z.enum(['true', 'false']).optional().openapi({
          description:
            "true: the audit log's entries too, as `event: audit` (no id; needs the scope admin). Absent: transitions only",
        }),
      }),
      headers: z.object({
        'last-event-id': z
          .string()
          .optional()
          .openapi({
            // SQLite: a transition number; Redis: a number too, or a cursor (a number per shard, joined by dots).
            pattern: cursorEventIds ? `^\\d{1,15}$|^\\d{1,15}(\\.\\d{1,15}){${SHARDS - 1}}$` : '^\\d{1,15}$',
            description: 'The id of the last event seen (sent back by EventSource on a reconnect)',
          }),
      }),
    },
    responses: {
      200: text(
        'text/event-stream',
        'event: transition, id: <event id>, data: {circuit, from, to, reason, at}; a comment heartbeat every 15 s. The id is opaque: the transition number on SQLite, a cursor over the shards on Redis (16 numbers joined by dots). A Last-Event-ID this server cannot resume from first gets event: reset, id: <newest id>, data: {"reason": "unknown-event-id" | "expired", "newest_id": <newest id>} (take a new snapshot), then live events',
      ),
      400: problem('Both filters, an unknown parameter, or a Last-Event-ID that is not an event id'),
      ...unauthorized,
      ...notAllowed,
      503: problem('events.max_streams streams already open; Retry-After'),
    },
  });
}

/** The dashboard page and its paged state API. */
function documentDashboard(app: OpenAPIHono): void {
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/dashboard',
    tags: ['observability'],
    summary: 'The dashboard page (holds no data; never needs the token)',
    responses: { 200: text('text/html', 'The page'), ...notAllowed },
  });
  app.openAPIRegistry.registerPath({
    method: 'get',
    path: '/dashboard/api/state',
    tags: ['observability'],
    summary:
      "The dashboard's data, a page of circuits at a time: circuits with their last transition, `next_after` (null on the last page), recent transitions, upstreams",
    request: {
      query: z.object({
        limit: z.number().int().min(1).max(1000).optional().openapi({ description: 'Circuits per page (default 500)' }),
        after: z
          .number()
          .int()
          .min(0)
          .optional()
          .openapi({ description: 'The `next_after` of the previous page (a circuit id); 0 for the first' }),
        state: z
          .enum(['closed', 'open', 'half_open'])
          .optional()
          .openapi({ description: 'Only circuits in this state (as a read now would show it)' }),
        q: z.string().min(1).max(200).optional().openapi({
          description:
            'Only circuits whose name contains this, ignoring case; an answer reads at most 5,000 circuits, so it may hold fewer than `limit` with a `next_after` to go on from',
        }),
      }),
    },
    responses: {
      200: { description: 'The state', content: { 'application/json': { schema: z.object({}).passthrough() } } },
      400: problem('invalid-query: a bad value or an unknown parameter (each named in errors)'),
      ...unauthorized,
      ...notAllowed,
    },
  });
}
