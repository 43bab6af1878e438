/**
 * The config file's `edge:` section (issue 32): the agent one runs on each host
 * (`circuitlog edge`, `node dist/edge.js`; src/edge, docs/gateways.md). The server ignores it.
 */
import { z } from 'zod';
import { circuitNameProblem } from '../domain/circuit-name.js';
import { positiveInt } from './fields.js';
import { allowedHostsSchema } from './service-schema.js';

/** `host:port` on which a listener binds; port 0 picks a free one. */
const hostPort = z
  .string()
  .regex(/^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, 'host:port, e.g. 127.0.0.1:8090 or [::1]:8090')
  .refine((v) => Number(v.slice(v.lastIndexOf(':') + 1)) <= 65_535, 'port must be 0..65535');

/** An HTTP header name (RFC 9110 token). */
const headerName = z
  .string()
  .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/, 'an HTTP header name')
  .transform((h) => h.toLowerCase());

/** Where a gateway's check request names its circuit (docs/gateways.md#naming-the-circuit). */
export const circuitFromSchema = z.union([
  /** `/gate/<name>`: the circuit is the rest of the check request's path (the default). */
  z.literal('path'),
  /** The `Host` of the original request (Traefik: `X-Forwarded-Host`), its port left out. */
  z.literal('host'),
  /** A request header holding the circuit's name. */
  z.object({ header: headerName }).strict(),
  /**
   * The original request's path (nginx: `X-Original-URI`; Traefik: `X-Forwarded-Uri`; Envoy: the
   * check path after `/gate`) against prefixes, longest first: `{ "/api/users/": "users-api" }`.
   */
  z
    .object({
      path_prefix: z
        .record(z.string().regex(/^\/[^\s?#]*$/, 'a path prefix starting with /'), z.string())
        .refine((m) => Object.keys(m).length > 0, 'name at least one prefix'),
    })
    .strict()
    .superRefine((v, ctx) => {
      for (const [prefix, name] of Object.entries(v.path_prefix)) {
        const problem = circuitNameProblem(name);
        if (problem !== null)
          ctx.addIssue({ code: 'custom', path: ['path_prefix', prefix], message: `circuit name ${problem}` });
      }
    }),
]);
export type CircuitFrom = z.infer<typeof circuitFromSchema>;

export const GATE_FORMS = ['auto', 'nginx', 'envoy', 'traefik'] as const;
export type GateForm = (typeof GATE_FORMS)[number];

export const edgeGateSchema = z
  .object({
    circuit_from: circuitFromSchema.default('path'),
    /** The header naming the caller (issue 17); none: the agent's own caller id. */
    caller_header: headerName.default('x-circuitlog-caller'),
    /**
     * How the check route answers: `nginx` (204 / 403, what auth_request understands), `envoy` and
     * `traefik` (200 / 503 problem with Retry-After), or `auto` (by the request: docs/gateways.md).
     */
    form: z.enum(GATE_FORMS).default('auto'),
  })
  .strict();

export const edgeSyslogSchema = z
  .object({
    /** UDP address for nginx's access log over syslog; null: no syslog intake. Loopback by default. */
    listen: hostPort.nullable().default(null),
    /** Longest datagram read; a longer one is dropped and counted. */
    max_line_bytes: positiveInt(65_507).default(8_192),
    /**
     * Circuits a log line may create on the server: names, or patterns with `*` as the last
     * character (`payments/*`), as credentials name circuits. Any other circuit must already exist
     * there, so noise never creates one.
     */
    create: z
      .array(
        z
          .string()
          .min(1)
          .max(200)
          .refine((p) => p.indexOf('*') === -1 || p.indexOf('*') === p.length - 1, '`*` only as the last character'),
      )
      .max(1_000)
      .default([]),
  })
  .strict();

export const edgeSchema = z
  .object({
    /** circuitlog's base URL (`--server`). */
    server: z.string().url().optional(),
    /** Where the agent serves (`--listen`); loopback by default. */
    listen: hostPort.default('127.0.0.1:8090'),
    /**
     * Host names the agent answers besides IP literals and localhost, as the server's
     * `server.allowed_hosts` (on loopback every other Host gets 421: a page that rebinds its DNS
     * name to 127.0.0.1 cannot report through the agent's token). `/gate` answers any Host
     * (nginx sends its upstream's name).
     */
    allowed_hosts: allowedHostsSchema.default([]),
    /** While circuitlog is unreachable: true answers behind a local breaker per circuit; false refuses (503). */
    fail_open: z.boolean().default(true),
    /** Outcomes kept while circuitlog is unreachable (the oldest dropped past it, counted) and the most waiting to be sent. */
    max_queued_outcomes: positiveInt(10_000_000).default(100_000),
    /** Outcomes wait at most this long before they are sent: at most one batch per this many ms while they flow. */
    flush_ms: positiveInt(1_000).default(10),
    /** Circuits kept in the local view (least recently used dropped past it). */
    max_circuits: positiveInt(1_000_000).default(10_000),
    /** Deadline of one request to circuitlog, in ms. */
    request_timeout_ms: positiveInt(60_000).default(2_000),
    gate: edgeGateSchema.prefault({}),
    syslog: edgeSyslogSchema.prefault({}),
  })
  .strict();

export type EdgeConfig = z.infer<typeof edgeSchema>;
export type EdgeGateConfig = z.infer<typeof edgeGateSchema>;
export type EdgeSyslogConfig = z.infer<typeof edgeSyslogSchema>;
