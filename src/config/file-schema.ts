/** The config file (YAML or JSON): its sections, the rules across them, and its parser. */
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { CIRCUIT_NAME_SEGMENT, SEGMENT_MAX_LENGTH, circuitNameProblem } from '../domain/circuit-name.js';
import { policySchema } from '../policy-schema.js';
import { auditSchema, authSchema } from './auth-schema.js';
import { circuitDefaultsSchema, declaredCircuitSchema } from './circuits-schema.js';
import { ConfigError, describeIssues } from './config-error.js';
import { positiveInt, segmentName } from './fields.js';
import { edgeSchema } from './edge-schema.js';
import { historySchema } from './history-schema.js';
import { eventsSchema, limitsSchema, metricsSchema, serverSchema, storeSchema } from './service-schema.js';
import { upstreamSchema, type UpstreamConfig } from './upstream-schema.js';

const sections = z
  .object({
    circuit_defaults: circuitDefaultsSchema.prefault({}),
    /** Circuits created, or updated to this policy, at every start (state kept). */
    circuits: z.record(z.string(), declaredCircuitSchema).default({}),
    local_dc: z.string().regex(CIRCUIT_NAME_SEGMENT).max(SEGMENT_MAX_LENGTH).optional(),
    /** The caller the proxy names on its node outcomes; default `<hostname>:<port>` (`Config.instanceId`). */
    instance_id: z
      .string()
      .regex(/^[A-Za-z0-9_.:~\-/]{1,128}$/, "1 to 128 letters, digits, _ . : ~ - and '/'")
      .optional(),
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
    server: serverSchema.prefault({}),
    metrics: metricsSchema.prefault({}),
    events: eventsSchema.prefault({}),
    limits: limitsSchema.prefault({}),
    /** Settings of the store `CIRCUITLOG_STORE` names (Redis only, so far); `Config.storeOptions`. */
    store: storeSchema.prefault({}),
    /** Credentials and JWT identities (issue 30; src/auth). */
    auth: authSchema.prefault({}),
    audit: auditSchema.prefault({}),
    /** The outcome history (issue 31; docs/operations.md#history). */
    history: historySchema.prefault({}),
    /** The edge agent's settings (issue 32; docs/gateways.md); the server ignores them. */
    edge: edgeSchema.prefault({}),
  })
  .strict();

type Sections = z.infer<typeof sections>;

/** Each `circuits:` entry: a valid name, and a valid policy over `circuit_defaults`. */
function checkDeclaredCircuits(cfg: Sections, ctx: z.RefinementCtx): void {
  const { probe_lease_seconds: _lease, ...defaults } = cfg.circuit_defaults;
  for (const [name, fields] of Object.entries(cfg.circuits)) {
    const problem = circuitNameProblem(name);
    if (problem !== null)
      ctx.addIssue({ code: 'custom', path: ['circuits', name], message: `circuit name ${problem}` });
    const { shadow, ...own } = fields;
    const full = policySchema.safeParse({ ...defaults, ...own });
    for (const issue of full.success ? [] : full.error.issues) {
      ctx.addIssue({ code: 'custom', path: ['circuits', name, ...issue.path], message: issue.message });
    }
    // The shadow (issue 31) is a policy over the circuit's own, checked whole too.
    const candidate = shadow == null ? null : policySchema.safeParse({ ...defaults, ...own, ...shadow });
    for (const issue of candidate === null || candidate.success ? [] : candidate.error.issues) {
      ctx.addIssue({ code: 'custom', path: ['circuits', name, 'shadow', ...issue.path], message: issue.message });
    }
  }
}

/** With upstreams, `local_dc` is set and names a data centre of each of them. */
function checkLocalDc(
  localDc: string | undefined,
  upstreams: Record<string, UpstreamConfig>,
  ctx: z.RefinementCtx,
): void {
  if (Object.keys(upstreams).length > 0 && localDc === undefined) {
    ctx.addIssue({ code: 'custom', path: ['local_dc'], message: 'is required when upstreams are configured' });
  }
  for (const [name, upstream] of Object.entries(upstreams)) {
    if (localDc === undefined || upstream.nodes.some((n) => n.dc === localDc)) continue;
    const dcs = [...new Set(upstream.nodes.map((n) => n.dc))].join(', ');
    ctx.addIssue({
      code: 'custom',
      path: ['local_dc'],
      message: `'${localDc}' matches no node of upstream '${name}' (its data centres: ${dcs})`,
    });
  }
}

const fileSchema = sections.superRefine((cfg, ctx) => {
  checkDeclaredCircuits(cfg, ctx);
  checkLocalDc(cfg.local_dc, cfg.upstreams, ctx);
});

export type FileConfig = z.infer<typeof fileSchema>;

/** Parse a YAML (or JSON) config text. */
export function parseConfigText(text: string, source: string): FileConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`${source}: not valid YAML/JSON: ${(error as Error).message}`);
  }
  // An empty file (or only comments) is most likely the wrong file, not "all defaults".
  if (raw === null || raw === undefined)
    throw new ConfigError(`${source}: the file is empty; leave CIRCUITLOG_CONFIG unset for the defaults`);
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(describeIssues(source, parsed.error));
  return parsed.data;
}
