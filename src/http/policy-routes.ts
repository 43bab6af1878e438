import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { policyOf } from '../domain/policy.js';
import { AppError, type FieldError } from '../domain/errors.js';
import { circuitNameProblem } from '../config.js';
import { policyFromWire, policySchema, patchedPolicy } from '../policy-schema.js';
import type { BreakerService } from '../service/breaker-service.js';
import { circuitNotFound, common, ok, problem, withBody } from './route-kit.js';
import { circuitNameParam, fieldErrors, prefersMinimal, readJson } from './request.js';
import { json } from './json.js';
import { CIRCUIT_NAME_RULE, CircuitSchema, NameParam, outcomeAt, outcomeTime } from './schemas.js';
import { circuitJson } from './circuit-json.js';
import { callerField } from './caller-param.js';
import { policyPatchSchema } from './policy-patch-doc.js';

/** Largest batch, and the body limit that fits it with 200-character names (about 260 bytes an item). */
export const MAX_BATCH_OUTCOMES = 1_000;
const BATCH_BODY_LIMIT_BYTES = 1024 * 1024; // 1 MiB
/**
 * Distinct callers one batch may name: a client batches its own outcomes under its one
 * caller id, so a batch naming more is a relay or an attack, and each new caller is an entry in
 * a circuit's caller table (docs/api.md "Callers, quorum and isolation").
 */
export const MAX_BATCH_CALLERS = 100;

// Any object here: the merged policy is checked whole, each field and unknown key named (422).
const PatchBody = z.record(z.string(), z.unknown());
const PATCH_DOC = { $ref: '#/components/schemas/PolicyPatch' };

const BatchItem = z
  .object({
    circuit: z
      .string()
      .superRefine((name, ctx) => {
        const reason = circuitNameProblem(name);
        if (reason !== null) ctx.addIssue({ code: 'custom', message: `circuit name ${reason}` });
      })
      .openapi(CIRCUIT_NAME_RULE),
    success: z.boolean(),
    duration_ms: z.number().min(0).max(86_400_000).optional(),
    at: outcomeAt,
    caller: callerField,
  })
  .strict();
const BatchBody = z
  .object({ outcomes: z.array(BatchItem).min(1).max(MAX_BATCH_OUTCOMES) })
  .strict()
  .superRefine(({ outcomes }, ctx) => {
    const callers = new Set<string>();
    for (const [i, o] of outcomes.entries()) {
      if (o.caller === undefined || callers.has(o.caller)) continue;
      if (callers.size === MAX_BATCH_CALLERS) {
        ctx.addIssue({
          code: 'custom',
          path: ['outcomes', i, 'caller'],
          message: `is a caller past the ${MAX_BATCH_CALLERS} distinct callers one batch may name`,
        });
        return;
      }
      callers.add(o.caller);
    }
  })
  .openapi('OutcomeBatch');
const BatchAnswer = z.object({
  results: z.array(z.object({ circuit: z.string(), state: z.enum(['closed', 'open', 'half_open']) })),
});

/** Zod issues as field errors, one per unknown key too. */
function policyFieldErrors(issues: readonly z.core.$ZodIssue[]): FieldError[] {
  return fieldErrors(issues, 'is not a policy field');
}

/** The patch formats PATCH understands, as `Accept-Patch` lists them (RFC 5789 section 3.1). */
export const ACCEPT_PATCH = 'application/merge-patch+json, application/json';
const MERGE_PATCH_TYPE = /^application\/(merge-patch\+)?json\s*(;|$)/i;

/**
 * A PATCH body in another format (RFC 6902's `application/json-patch+json`, say) is a 415
 * with `Accept-Patch`, as RFC 5789 section 2.2 says: it is not a bad merge patch (422).
 * No Content-Type is left to `readJson` (no body is fine; a body without one is its 415).
 */
function requireMergePatch(contentType: string | undefined): void {
  if (contentType === undefined || contentType === '' || MERGE_PATCH_TYPE.test(contentType)) return;
  throw new AppError(
    'UNSUPPORTED_MEDIA_TYPE',
    `PATCH takes a JSON merge patch (RFC 7396) as application/merge-patch+json or application/json, not ${contentType.split(';')[0]!.trim()}.`,
    { headers: { 'accept-patch': ACCEPT_PATCH } },
  );
}

export interface PolicyRouteOptions {
  readonly bodyLimitBytes: number;
  /** Circuits defined by the config (proxy nodes): they cannot be deleted. */
  readonly isConfigCircuit: (name: string) => boolean;
}

/** PATCH and DELETE of a circuit, and the batch of outcomes. */
export function registerPolicyRoutes(app: OpenAPIHono, breaker: BreakerService, options: PolicyRouteOptions): void {
  registerPatch(app, breaker, options.bodyLimitBytes);
  registerDelete(app, breaker, options.isConfigCircuit);
  registerBatch(app, breaker, options.bodyLimitBytes);
}

/** `PATCH /circuits/{name}`: a JSON merge patch of the policy, merged inside the store's write. */
function registerPatch(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  const patchRoute = createRoute({
    method: 'patch',
    path: '/circuits/{name}',
    tags: ['circuits'],
    summary: "Change a circuit's policy (JSON merge patch); creates the circuit with the defaults first when missing",
    request: {
      params: NameParam,
      body: {
        required: true,
        content: { 'application/merge-patch+json': { schema: PATCH_DOC }, 'application/json': { schema: PATCH_DOC } },
      },
    },
    responses: {
      200: ok('The changed circuit', CircuitSchema),
      201: ok('The new circuit', CircuitSchema),
      ...withBody,
      415: problem(
        'A body in another format than a JSON merge patch (application/json-patch+json included); Accept-Patch lists the formats',
      ),
      422: problem(
        'Invalid policy fields (each named in errors), or a patched policy that breaks a rule across fields; nothing changed',
      ),
    },
  });
  app.openAPIRegistry.registerComponent('schemas', 'PolicyPatch', policyPatchSchema());
  app.openAPIRegistry.registerPath(patchRoute);
  app.patch('/circuits/:name', async (c) => {
    const name = circuitNameParam(c);
    requireMergePatch(c.req.header('content-type'));
    const patch = await readJson(c, PatchBody, bodyLimitBytes);
    // The merge runs inside the store's write transaction, on the circuit as stored.
    const { circuit, created } = await breaker.withRoom([name], async () =>
      breaker.configure(name, (current) => {
        const merged = policySchema.safeParse(
          patchedPolicy(current === null ? breaker.defaults : policyOf(current), breaker.defaults, patch),
        );
        if (!merged.success) {
          throw new AppError('VALIDATION_FAILED', 'The policy patch has invalid fields; nothing was changed.', {
            fields: policyFieldErrors(merged.error.issues),
          });
        }
        return policyFromWire(merged.data);
      }),
    );
    const headers = created ? { location: `/circuits/${encodeURIComponent(name)}` } : undefined;
    return json(c, circuitJson(circuit, breaker.now()), created ? 201 : 200, headers);
  });
}

/** `DELETE /circuits/{name}`: the circuit and its events; a proxy node's circuit is the config's (409). */
function registerDelete(app: OpenAPIHono, breaker: BreakerService, isConfigCircuit: (name: string) => boolean): void {
  const deleteRoute = createRoute({
    method: 'delete',
    path: '/circuits/{name}',
    tags: ['circuits'],
    summary: 'Delete a circuit and its events',
    request: { params: NameParam },
    responses: {
      204: { description: 'Deleted' },
      ...common,
      404: problem('Unknown circuit'),
      409: problem("A proxy node's circuit: defined by the config"),
    },
  });
  app.openAPIRegistry.registerPath(deleteRoute);
  app.delete('/circuits/:name', async (c) => {
    const name = circuitNameParam(c);
    if (isConfigCircuit(name)) {
      throw new AppError(
        'CIRCUIT_DEFINED_BY_CONFIG',
        `Circuit '${name}' belongs to a proxy node and is defined by the config; PATCH it instead.`,
      );
    }
    if (!(await breaker.delete(name))) throw circuitNotFound(name);
    return c.body(null, 204);
  });
}

/** `POST /outcomes`: up to MAX_BATCH_OUTCOMES outcomes in order, in one transaction. */
function registerBatch(app: OpenAPIHono, breaker: BreakerService, bodyLimitBytes: number): void {
  const batchRoute = createRoute({
    method: 'post',
    path: '/outcomes',
    tags: ['circuits'],
    summary: `Record 1-${MAX_BATCH_OUTCOMES} outcomes in order, in one transaction (creating circuits with the defaults)`,
    request: {
      headers: z.object({
        prefer: z.string().optional().openapi({
          description: 'return=minimal (RFC 7240): answer 204 with no body (Preference-Applied: return=minimal)',
          example: 'return=minimal',
        }),
      }),
      body: { required: true, content: { 'application/json': { schema: BatchBody } } },
    },
    responses: {
      200: ok("Each item's circuit and its state after it, in order", BatchAnswer),
      204: { description: 'Recorded, with Prefer: return=minimal (Preference-Applied: return=minimal)' },
      ...withBody,
      413: problem('Body over 1 MiB (or api_body_limit_bytes, the larger)'),
      422: problem(
        `An invalid item (errors name it as outcomes.<index>.<field>), or more than ${MAX_BATCH_CALLERS} distinct callers; nothing was recorded`,
      ),
    },
  });
  app.openAPIRegistry.registerPath(batchRoute);
  app.post('/outcomes', async (c) => {
    const body = await readJson(c, BatchBody, Math.max(bodyLimitBytes, BATCH_BODY_LIMIT_BYTES));
    const now = breaker.now();
    const circuits = await breaker.recordBatch(
      body.outcomes.map((o, i) => ({
        name: o.circuit,
        success: o.success,
        durationMs: o.duration_ms,
        late: 'count_only' as const,
        at: outcomeTime(o.at, now, `outcomes.${i}.at`),
        ...(o.caller === undefined ? {} : { caller: o.caller }),
      })),
    );
    if (prefersMinimal(c)) return c.body(null, 204, { 'preference-applied': 'return=minimal' });
    return json(c, { results: circuits.map((circuit) => ({ circuit: circuit.name, state: circuit.state })) }, 200);
  });
}
