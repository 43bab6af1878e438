/** The config file's `upstreams.<name>` section: nodes, timeouts, health checks, fallback, coalescing. */
import { validateHeaderName, validateHeaderValue } from 'node:http';
import { z } from 'zod';
import type { CircuitPolicy } from '../domain/policy.js';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import { redactUrl } from '../domain/redact-url.js';
import { policyFromWire } from '../domain/policy-wire.js';
import { checkPolicy, policyFields } from '../policy-schema.js';
import { policyOverrides } from './circuits-schema.js';
import { dcName, positiveInt, segmentName } from './fields.js';
import { checkOneLimit, concurrencySchema, retryBudgetSchema } from './overload-schema.js';

const nodeSchema = z
  .object({
    id: segmentName,
    dc: dcName,
    url: z.string().superRefine((u, ctx) => {
      const problem = nodeUrlProblem(u);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  })
  .strict();

/** `null` for an http(s) URL with a valid host and port and no query or fragment, else why not. */
function nodeUrlProblem(text: string): string | null {
  // URL.canParse first: `new URL` throws on 'not a url' or port 99999, which must be a message, not a crash.
  if (!URL.canParse(text))
    return `must be an http:// or https:// URL with a valid host and port, got '${redactUrl(text)}'`;
  const url = new URL(text);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'must be an http:// or https:// URL';
  if (url.search !== '' || url.hash !== '') return 'must not have a query or fragment';
  return null;
}

/** The problem node:http would raise later for a header, or null (checked at start, not per answer). */
function headerProblem(name: string, value: string): string | null {
  try {
    validateHeaderName(name);
    validateHeaderValue(name, value);
    return null;
  } catch (error) {
    return (error as Error).message;
  }
}

const healthCheckSchema = z
  .object({
    enabled: z.boolean().default(true),
    path: z.string().startsWith('/').default('/health'),
    interval_ms: positiveInt(3_600_000).default(5_000), // 5 s
    timeout_ms: positiveInt(600_000).default(2_000), // 2 s
  })
  .strict();

const staticFallbackSchema = z
  .object({
    status: z.number().int().min(200).max(599).default(503),
    headers: z
      .record(z.string(), z.string())
      .default({})
      .superRefine((headers, ctx) => {
        for (const [name, value] of Object.entries(headers)) {
          const problem = headerProblem(name, value);
          if (problem) ctx.addIssue({ code: 'custom', path: [name], message: problem });
        }
      }),
    body: z.string().default(''),
  })
  .strict();

const fallbackSchema = z
  .object({
    /** Serve the last successful GET answer for the same path if younger than this. */
    stale_seconds: positiveInt(7 * 86_400).optional(),
    /** Largest GET answer kept for stale fallback. */
    stale_max_body_bytes: positiveInt(64 * 1024 * 1024).default(1024 * 1024), // 1 MiB
    /** Bound on all kept GET answers of this upstream together; oldest go first. */
    stale_max_total_bytes: positiveInt(1024 * 1024 * 1024).default(16 * 1024 * 1024), // 16 MiB
    static: staticFallbackSchema.optional(),
  })
  .strict();

/** Request coalescing: concurrent identical reads share one upstream call (docs/proxy.md). */
const coalesceSchema = z
  .object({
    enabled: z.boolean().default(false),
    max_waiters: positiveInt(1_000_000).default(1000),
    max_body_bytes: positiveInt(64 * 1024 * 1024).default(1024 * 1024), // 1 MiB
  })
  .strict();

export const upstreamSchema = z
  .object({
    nodes: z.array(nodeSchema).min(1),
    failure_threshold: positiveInt(1_000_000).default(POLICY_DEFAULTS.upstreamFailureThreshold),
    timeout_seconds: policyFields.timeout_seconds.default(POLICY_DEFAULTS.circuit.timeoutSeconds),
    half_open_max_calls: policyFields.half_open_max_calls.default(POLICY_DEFAULTS.circuit.halfOpenMaxCalls),
    request_timeout_ms: positiveInt(600_000).default(3_000), // 3 s
    /** Longest silence between two chunks of a caller's request body; then 408, no node outcome (nginx's client_body_timeout). */
    client_body_timeout_ms: positiveInt(600_000).default(10_000), // 10 s
    /** Longest wait for a caller to take any of the answer bytes waiting for it; then the connection is cut (nginx's send_timeout). */
    send_timeout_ms: positiveInt(600_000).default(60_000), // 60 s
    /** Request fields besides Authorization and Cookie that carry credentials: never coalesced, never kept for the stale fallback. */
    credential_headers: z
      .array(
        z
          .string()
          .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'a header field name (RFC 9110 section 5.1)')
          .max(128),
      )
      .max(64)
      .default(['X-Api-Key', 'Api-Key', 'X-Auth-Token'])
      .transform((names) => names.map((n) => n.toLowerCase())),
    retries: z.number().int().min(0).max(10).default(1),
    /** When given, the whole list of node answers that are failures; absent: issue 29's table (docs/proxy.md#how-a-node-answer-counts). */
    failure_statuses: z.array(z.number().int().min(100).max(599)).optional(),
    /** Retry a throttled answer (429, 503 + Retry-After) of an idempotent request on another node; off as in Envoy (opt-in `retriable-status-codes`). */
    retry_throttled: z.boolean().default(false),
    health_check: healthCheckSchema.prefault({}),
    max_concurrent: positiveInt(1_000_000).optional(),
    /** A fixed or adaptive limit on requests in flight (docs/proxy.md#overload-control-concurrency-limits-and-the-retry-budget). */
    concurrency: concurrencySchema.optional(),
    retry_budget: retryBudgetSchema.prefault({}),
    fallback: fallbackSchema.optional(),
    coalesce: coalesceSchema.prefault({}),
    /** Share of the nodes request outcomes may hold open at once (Envoy's max_ejection_percent); docs/proxy.md#guard-rails-ejection-cap-panic-detect-only. */
    max_ejection_percent: z.number().int().min(0).max(100).default(100),
    /** Below this share of nodes available, node breakers are not honoured (Envoy's panic threshold); 0: off. */
    panic_threshold_percent: z.number().int().min(0).max(100).default(0),
    ...policyOverrides,
  })
  .strict()
  .superRefine((u, ctx) => {
    checkPolicy(u, ctx);
    checkOneLimit(u, ctx);
    const seen = new Set<string>();
    u.nodes.forEach((node, i) => {
      if (seen.has(node.id))
        ctx.addIssue({ code: 'custom', path: ['nodes', i, 'id'], message: `duplicate node id '${node.id}'` });
      seen.add(node.id);
    });
  });

export type UpstreamConfig = z.infer<typeof upstreamSchema>;
export type NodeConfig = z.infer<typeof nodeSchema>;

/** The policy of an upstream's node circuits: the fields it sets, the rest from `POLICY_DEFAULTS.circuit`. */
export function upstreamPolicy(u: UpstreamConfig): CircuitPolicy {
  const d = POLICY_DEFAULTS.circuit;
  return policyFromWire({
    failure_threshold: u.failure_threshold,
    timeout_seconds: u.timeout_seconds,
    half_open_max_calls: u.half_open_max_calls,
    success_threshold: u.success_threshold ?? d.successThreshold,
    window: u.window ?? d.window,
    backoff: u.backoff ?? d.backoff,
    forced_state: u.forced_state ?? d.forcedState,
    throttle: u.throttle ?? d.throttle,
    quorum: u.quorum ?? null,
    count_as: u.count_as,
    min_deadline_ms: u.min_deadline_ms,
    max_retry_after_seconds: u.max_retry_after_seconds,
    throttle_scope: u.throttle_scope,
    ramp: u.ramp,
    history: u.history,
  });
}
