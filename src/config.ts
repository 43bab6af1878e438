import fs from 'node:fs';
import { validateHeaderName, validateHeaderValue } from 'node:http';
import net from 'node:net';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { checkPolicy, policyFields, policySchema } from './policy-schema.js';
import { DEFAULT_DB_PATH, parseStoreChoice, redactUrl, type StoreChoice } from './store/store-choice.js';

import { CIRCUIT_NAME_MAX_LENGTH, circuitNameProblem } from './domain/circuit-name.js';

export { CIRCUIT_NAME_MAX_LENGTH, circuitNameProblem };
const SEGMENT = /^[A-Za-z0-9_.:~-]+$/;

const positiveInt = (max: number) => z.number().int().min(1).max(max);

const circuitDefaultsSchema = z
  .object({
    failure_threshold: positiveInt(1_000_000_000).default(5),
    timeout_seconds: positiveInt(30 * 86_400).default(30), // 30 s; at most 30 days
    half_open_max_calls: positiveInt(10_000).default(1),
    success_threshold: policyFields.success_threshold.default(1),
    window: policyFields.window.default(null),
    backoff: policyFields.backoff.default(null),
    forced_state: policyFields.forced_state.default(null),
    throttle: policyFields.throttle.default(null),
    probe_lease_seconds: positiveInt(86_400).default(10), // 10 s
  })
  .strict()
  .superRefine(checkPolicy);

/** Policy fields an upstream or a declared circuit may set; the rest come from elsewhere. */
const policyOverrides = {
  success_threshold: policyFields.success_threshold.optional(),
  window: policyFields.window.optional(),
  backoff: policyFields.backoff.optional(),
  forced_state: policyFields.forced_state.optional(),
  throttle: policyFields.throttle.optional(),
};

/** `circuits:` entries: any policy fields, over `circuit_defaults`. */
const declaredCircuitSchema = z.object(policyFields).partial().strict();

/** A node id or upstream name: one circuit-name segment, never '.' or '..'. */
const segmentName = z
  .string()
  .regex(SEGMENT, 'letters, digits and _ . : ~ - only')
  .max(64)
  .refine((s) => s !== '.' && s !== '..', "must not be '.' or '..'");

const nodeSchema = z
  .object({
    id: segmentName,
    dc: z.string().regex(SEGMENT, 'letters, digits and _ . : ~ - only').max(64),
    url: z.string().superRefine((u, ctx) => {
      const problem = nodeUrlProblem(u);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  })
  .strict();

/** `null` for an http(s) URL with a valid host and port and no query or fragment, else why not. */
function nodeUrlProblem(text: string): string | null {
  // URL.canParse first: `new URL` throws on 'not a url' or port 99999, which must be a message, not a crash.
  if (!URL.canParse(text)) return `must be an http:// or https:// URL with a valid host and port, got '${text}'`;
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

const fallbackSchema = z
  .object({
    /** Serve the last successful GET answer for the same path if younger than this. */
    stale_seconds: positiveInt(7 * 86_400).optional(),
    /** Largest GET answer kept for stale fallback. */
    stale_max_body_bytes: positiveInt(64 * 1024 * 1024).default(1024 * 1024), // 1 MiB
    /** Bound on all kept GET answers of this upstream together; oldest go first. */
    stale_max_total_bytes: positiveInt(1024 * 1024 * 1024).default(16 * 1024 * 1024), // 16 MiB
    static: z
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
      .strict()
      .optional(),
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

const upstreamSchema = z
  .object({
    nodes: z.array(nodeSchema).min(1),
    failure_threshold: positiveInt(1_000_000).default(3),
    timeout_seconds: positiveInt(30 * 86_400).default(30), // 30 s
    half_open_max_calls: positiveInt(10_000).default(1),
    request_timeout_ms: positiveInt(600_000).default(3_000), // 3 s
    /** Longest silence between two chunks of a caller's request body; then 408, no node outcome (nginx's client_body_timeout). */
    client_body_timeout_ms: positiveInt(600_000).default(10_000), // 10 s
    /** Request fields besides Authorization and Cookie that carry credentials: never coalesced, never kept for the stale fallback. */
    credential_headers: z
      .array(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, 'a header field name (RFC 9110 section 5.1)').max(128))
      .max(64)
      .default(['X-Api-Key', 'Api-Key', 'X-Auth-Token'])
      .transform((names) => names.map((n) => n.toLowerCase())),
    retries: z.number().int().min(0).max(10).default(1),
    failure_statuses: z.array(z.number().int().min(100).max(599)).default([500, 502, 503, 504]),
    health_check: healthCheckSchema.default({ enabled: true, path: '/health', interval_ms: 5_000, timeout_ms: 2_000 }),
    max_concurrent: positiveInt(1_000_000).optional(),
    fallback: fallbackSchema.optional(),
    coalesce: coalesceSchema.default({ enabled: false, max_waiters: 1000, max_body_bytes: 1024 * 1024 }),
    ...policyOverrides,
  })
  .strict()
  .superRefine((u, ctx) => {
    checkPolicy(u, ctx);
    const seen = new Set<string>();
    u.nodes.forEach((node, i) => {
      if (seen.has(node.id)) ctx.addIssue({ code: 'custom', path: ['nodes', i, 'id'], message: `duplicate node id '${node.id}'` });
      seen.add(node.id);
    });
  });

/** Timeouts of the HTTP server itself (node:http), so slow or idle clients cannot hold connections. */
const serverSchema = z
  .object({
    /** Time to receive a request's headers (slowloris). */
    headers_timeout_ms: positiveInt(600_000).default(10_000), // 10 s
    /** Time to receive a whole request, body included. */
    request_timeout_ms: positiveInt(3_600_000).default(60_000), // 60 s
    /** How long an idle keep-alive connection stays open between requests. */
    keep_alive_timeout_ms: positiveInt(600_000).default(5_000), // 5 s
    /**
     * Host names answered besides IP literals and localhost (`.example.com`: the domain and
     * its subdomains); others get 421. Unset: only those on loopback, no check elsewhere.
     */
    allowed_hosts: z
      .array(z.string().regex(/^\.?(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*$/, 'must be a host name (letters, digits, - and .), or .domain for a domain and its subdomains'))
      .max(1_000)
      .optional(),
  })
  .strict()
  .refine((s) => s.headers_timeout_ms <= s.request_timeout_ms, {
    path: ['headers_timeout_ms'],
    message: 'must not exceed server.request_timeout_ms',
  });

const metricsSchema = z
  .object({
    /** Serve /metrics and count; off takes the counters off the hot path too. */
    enabled: z.boolean().default(true),
    /** Circuits with their own series (the first by creation); the rest only in circuitlog_circuits. */
    max_circuits: z.number().int().min(0).max(1_000_000).default(10_000),
  })
  .strict();

/** How long the transition log keeps its rows (docs/operations.md#retention); 0 turns a bound off. */
const retentionSchema = z
  .object({
    /** Transitions older than this are deleted. */
    max_age_days: z.number().int().min(0).max(36_500).default(30), // 30 days
    /** Only each circuit's newest this many transitions are kept. */
    max_per_circuit: z.number().int().min(0).max(1_000_000).default(1_000),
  })
  .strict();

const eventsSchema = z
  .object({
    /** Open /events/stream connections per worker; one more gets a 503. */
    max_streams: positiveInt(1_000_000).default(1_000),
    /** Unsent bytes one stream may hold; past it the stream is destroyed (the client resumes with Last-Event-ID). */
    max_stream_buffer_bytes: z.number().int().min(16 * 1024).max(1024 * 1024 * 1024).default(1024 * 1024), // 1 MiB, as Envoy's per-connection buffer limit
    retention: retentionSchema.default({ max_age_days: 30, max_per_circuit: 1_000 }),
  })
  .strict();

/** Bounds on what callers can make the service hold (docs/operations.md#limits). */
const limitsSchema = z
  .object({
    /** Closed, unforced, undeclared circuits with no outcome for this long are deleted; null: never. */
    idle_circuit_days: positiveInt(36_500).nullable().default(null),
    /** Circuits the store may hold; a new name past it gets 507 too-many-circuits. */
    max_circuits: positiveInt(1_000_000_000).default(1_000_000),
  })
  .strict();

const storeSchema = z
  .object({
    redis: z
      .object({
        /**
         * Replicas that must confirm a write (Redis `WAIT`) before it is acknowledged; 0: Redis's
         * asynchronous replication (an acknowledged write can be lost in a failover).
         */
        replicas_ack: z.number().int().min(0).max(16).default(0),
        /** How long `WAIT` waits for them; past it the write answers 503 storage-unavailable. */
        replicas_ack_timeout_ms: positiveInt(60_000).default(1_000), // 1 s
      })
      .strict()
      .default({ replicas_ack: 0, replicas_ack_timeout_ms: 1_000 }),
  })
  .strict();

const fileSchema = z
  .object({
    circuit_defaults: circuitDefaultsSchema.default({
      failure_threshold: 5,
      timeout_seconds: 30,
      half_open_max_calls: 1,
      success_threshold: 1,
      window: null,
      backoff: null,
      forced_state: null,
      throttle: null,
      probe_lease_seconds: 10,
    }),
    /** Circuits created, or updated to this policy, at every start (state kept). */
    circuits: z.record(z.string(), declaredCircuitSchema).default({}),
    local_dc: z.string().regex(SEGMENT).max(64).optional(),
    upstreams: z.record(segmentName, upstreamSchema).default({}),
    /** How long SIGTERM waits for in-flight requests. */
    shutdown_grace_ms: positiveInt(600_000).default(10_000), // 10 s
    /**
     * After SIGTERM, how long to keep serving with /health/ready at 503 before the port closes,
     * so load balancers stop sending first (kube-apiserver's --shutdown-delay-duration).
     */
    shutdown_delay_ms: z.number().int().min(0).max(600_000).default(0),
    /** Largest request body accepted by the /circuits API. */
    api_body_limit_bytes: positiveInt(16 * 1024 * 1024).default(16 * 1024), // 16 KiB
    server: serverSchema.default({ headers_timeout_ms: 10_000, request_timeout_ms: 60_000, keep_alive_timeout_ms: 5_000 }),
    metrics: metricsSchema.default({ enabled: true, max_circuits: 10_000 }),
    events: eventsSchema.default({ max_streams: 1_000, max_stream_buffer_bytes: 1024 * 1024, retention: { max_age_days: 30, max_per_circuit: 1_000 } }),
    limits: limitsSchema.default({ idle_circuit_days: null, max_circuits: 1_000_000 }),
    /** Settings of the store `CIRCUITLOG_STORE` names (Redis only, so far); `Config.storeOptions`. */
    store: storeSchema.default({ redis: { replicas_ack: 0, replicas_ack_timeout_ms: 1_000 } }),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const { probe_lease_seconds: _lease, ...defaults } = cfg.circuit_defaults;
    for (const [name, fields] of Object.entries(cfg.circuits)) {
      const problem = circuitNameProblem(name);
      if (problem !== null) ctx.addIssue({ code: 'custom', path: ['circuits', name], message: `circuit name ${problem}` });
      const full = policySchema.safeParse({ ...defaults, ...fields });
      for (const issue of full.success ? [] : full.error.issues) {
        ctx.addIssue({ code: 'custom', path: ['circuits', name, ...issue.path], message: issue.message });
      }
    }
    if (Object.keys(cfg.upstreams).length > 0 && cfg.local_dc === undefined) {
      ctx.addIssue({ code: 'custom', path: ['local_dc'], message: 'is required when upstreams are configured' });
    }
    for (const [name, upstream] of Object.entries(cfg.upstreams)) {
      if (cfg.local_dc === undefined || upstream.nodes.some((n) => n.dc === cfg.local_dc)) continue;
      const dcs = [...new Set(upstream.nodes.map((n) => n.dc))].join(', ');
      ctx.addIssue({ code: 'custom', path: ['local_dc'], message: `'${cfg.local_dc}' matches no node of upstream '${name}' (its data centres: ${dcs})` });
    }
  });

export type FileConfig = z.infer<typeof fileSchema>;
export type UpstreamConfig = z.infer<typeof upstreamSchema>;
export type NodeConfig = z.infer<typeof nodeSchema>;
export type ServerConfig = z.infer<typeof serverSchema>;

export interface Config extends Omit<FileConfig, 'store'> {
  /** The config file's `store:` section (the store itself comes from `CIRCUITLOG_STORE`). */
  readonly storeOptions: FileConfig['store'];
  readonly port: number;
  readonly host: string;
  readonly dbPath: string;
  readonly configPath: string | undefined;
  readonly token: string | undefined;
  readonly logLevel: string;
  readonly synchronous: 'NORMAL' | 'FULL';
  readonly workers: number;
  readonly groupCommit: boolean;
  /** `CIRCUITLOG_STORE`; SQLite at `dbPath` unless it names a Redis. */
  readonly store: StoreChoice;
  /** What the proxy does when the store cannot be reached: the local DC's nodes unguarded, or 503. */
  readonly proxyOnStorageOutage: 'fail_open' | 'refuse';
}

/** Raised for a bad environment variable or config key; the message names it. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** `<source> <key>: <message>` per issue; the source alone when the issue is about the whole file. */
function describeIssues(source: string, error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const key = issue.path.reduce<string>(
        (acc, part) => (typeof part === 'number' ? `${acc}[${part}]` : acc ? `${acc}.${String(part)}` : String(part)),
        '',
      );
      return `${source}${key ? ` ${key}` : ''}: ${issue.message}`;
    })
    .join('; ');
}

/** Parse a YAML (or JSON) config text. */
export function parseConfigText(text: string, source: string): FileConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`${source}: not valid YAML/JSON: ${(error as Error).message}`);
  }
  // An empty file (or only comments) is most likely the wrong file, not "all defaults".
  if (raw === null || raw === undefined) throw new ConfigError(`${source}: the file is empty; leave CIRCUITLOG_CONFIG unset for the defaults`);
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(describeIssues(source, parsed.error));
  return parsed.data;
}

function intFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const value = env[name];
  if (value === undefined || value === '') return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(`${name}: must be an integer from ${min} to ${max}, got '${value}'`);
  }
  return Number(value);
}

/** An IP literal, or a host name of RFC 1123 labels; anything else cannot be listened on. */
function isHost(host: string): boolean {
  if (net.isIP(host) !== 0) return true;
  return host.length <= 253 && /^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?$/.test(host);
}

/** `auto` (any case) is the CPU count; else an integer from 1 to 256. */
function parseWorkers(name: string, raw: string): number {
  if (raw.toLowerCase() === 'auto') return os.availableParallelism();
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > 256) {
    throw new ConfigError(`${name}: must be an integer from 1 to 256 or 'auto' (the CPU count), got '${raw}'`);
  }
  return Number(raw);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Command-line flags; each overrides its environment variable. */
function parseFlags(argv: readonly string[]): { workers?: string } {
  try {
    return parseArgs({ args: [...argv], options: { workers: { type: 'string' } }, strict: true, allowPositionals: false }).values;
  } catch (error) {
    throw new ConfigError(`command line: ${(error as Error).message}; the only flag is --workers <N|auto>`);
  }
}

/**
 * Read the environment, the command line (`--workers`) and the optional config file
 * once; every default lives here.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, argv: readonly string[] = process.argv.slice(2)): Config {
  const flags = parseFlags(argv);
  const port = intFromEnv(env, 'PORT', 8080, 0, 65_535);
  const host = env.HOST || '127.0.0.1';
  if (!isHost(host)) throw new ConfigError(`HOST: must be an IP address or a host name (letters, digits, '-' and '.'), got '${host}'`);
  const store = parseStoreChoice(env, (message) => new ConfigError(message));
  const dbPath = store.kind === 'sqlite' ? store.path : env.CIRCUITLOG_DB || DEFAULT_DB_PATH;
  const proxyOnStorageOutage = (env.CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE || 'fail_open').toLowerCase();
  if (proxyOnStorageOutage !== 'fail_open' && proxyOnStorageOutage !== 'refuse') {
    throw new ConfigError(`CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE: must be fail_open or refuse, got '${env.CIRCUITLOG_PROXY_ON_STORAGE_OUTAGE}'`);
  }
  const token = env.CIRCUITLOG_TOKEN;
  if (token !== undefined && token.trim() !== token) {
    // HTTP strips the spaces around a header value, so such a token could never match.
    throw new ConfigError('CIRCUITLOG_TOKEN: must not begin or end with whitespace');
  }
  if (token !== undefined && token.length > 0 && token.length < 16) {
    throw new ConfigError('CIRCUITLOG_TOKEN: must be at least 16 characters');
  }
  const logLevel = (env.CIRCUITLOG_LOG_LEVEL || 'info').toLowerCase();
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`CIRCUITLOG_LOG_LEVEL: must be one of ${LOG_LEVELS.join(', ')}, got '${logLevel}'`);
  }
  const synchronous = (env.CIRCUITLOG_SYNCHRONOUS || 'NORMAL').toUpperCase();
  if (synchronous !== 'NORMAL' && synchronous !== 'FULL') {
    throw new ConfigError(`CIRCUITLOG_SYNCHRONOUS: must be NORMAL or FULL, got '${env.CIRCUITLOG_SYNCHRONOUS}'`);
  }
  const workersName = flags.workers === undefined ? 'CIRCUITLOG_WORKERS' : '--workers';
  const workersRaw = flags.workers ?? (env.CIRCUITLOG_WORKERS || '1');
  const workers = parseWorkers(workersName, workersRaw);
  const groupCommit = (env.CIRCUITLOG_GROUP_COMMIT || 'on').toLowerCase();
  if (groupCommit !== 'on' && groupCommit !== 'off') {
    throw new ConfigError(`CIRCUITLOG_GROUP_COMMIT: must be on or off, got '${env.CIRCUITLOG_GROUP_COMMIT}'`);
  }
  const configPath = env.CIRCUITLOG_CONFIG || undefined;
  let file: FileConfig = parseConfigText('{}', 'defaults');
  if (configPath !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(configPath, 'utf8');
    } catch (error) {
      throw new ConfigError(`CIRCUITLOG_CONFIG: cannot read '${configPath}': ${(error as Error).message}`);
    }
    file = parseConfigText(text, `CIRCUITLOG_CONFIG ${configPath}`);
  }
  const { store: storeOptions, ...rest } = file;
  return {
    ...rest,
    storeOptions,
    port,
    host,
    dbPath,
    store,
    proxyOnStorageOutage,
    configPath,
    token: token || undefined,
    logLevel,
    synchronous,
    workers,
    groupCommit: groupCommit === 'on',
  };
}

/** Whether the config defines a circuit (declared under `circuits:`, or a proxy node's): never deleted as idle. */
export function configDefinedCircuit(config: Pick<FileConfig, 'circuits' | 'upstreams'>): (name: string) => boolean {
  const names = new Set(Object.keys(config.circuits));
  for (const [upstream, { nodes }] of Object.entries(config.upstreams)) for (const node of nodes) names.add(`${upstream}/${node.id}`);
  return (name) => names.has(name);
}

/** What the service runs with, for the one start-up log line: never the token itself. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    config_file: config.configPath ?? null,
    upstreams: Object.keys(config.upstreams),
    local_dc: config.local_dc ?? null,
    token: config.token === undefined ? 'off' : 'on',
    workers: config.workers,
    synchronous: config.synchronous,
    group_commit: config.groupCommit ? 'on' : 'off',
    declared_circuits: Object.keys(config.circuits).length,
    db: config.store.kind === 'sqlite' ? config.dbPath : null,
    store: config.store.kind === 'sqlite' ? `sqlite:${config.dbPath}` : redactUrl(config.store.url),
    host: config.host,
    port: config.port,
    log_level: config.logLevel,
  };
}
