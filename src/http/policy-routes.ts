import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { type CircuitPolicy, policyOf } from '../domain/policy.js';
import { promotedPolicy } from '../domain/shadow.js';
import type { AuditAction } from '../domain/audit-entry.js';
import { AppError, type FieldError } from '../domain/errors.js';
import { policyFromWire, policySchema, patchedPolicy } from '../policy-schema.js';
import type { BreakerService, PolicyChange } from '../service/breaker-service.js';
import { circuitNameParam, fieldErrors, newCircuitQuota, ok, problem, readJson, withBody } from './route-kit.js';
import { json } from './json.js';
import { CircuitSchema, NameParam } from './schemas.js';
import { circuitJson } from './circuit-json.js';
import { policyPatchSchema } from './policy-patch-doc.js';
import { auditRequest, type AuditLog } from '../audit/audit-log.js';
import { patchChange } from '../audit/audit-values.js';
import { identityOf } from '../auth/request-identity.js';
import { patchScope } from '../auth/route-scopes.js';
import { requireScope } from './route-auth.js';

// Any object here: the merged policy is checked whole, each field and unknown key named (422).
const PatchBody = z.record(z.string(), z.unknown());
const PATCH_DOC = { $ref: '#/components/schemas/PolicyPatch' };

/** Zod issues as field errors, one per unknown key too. */
function policyFieldErrors(issues: readonly z.core.$ZodIssue[]): FieldError[] {
  return fieldErrors(issues, 'is not a policy field');
}

/**
 * A PATCH's `shadow` member (issue 31) apart from the live policy's fields: a merge patch of
 * the live policy (the shadow's policy), null (clear it), `promote` (alone: the shadow becomes
 * the live policy), or undefined (not sent). Anything else is a VALIDATION_FAILED naming `shadow`.
 */
function splitShadow(patch: Record<string, unknown>): {
  live: Record<string, unknown>;
  shadow: Record<string, unknown> | null | 'promote' | undefined;
} {
  if (!('shadow' in patch)) return { live: patch, shadow: undefined };
  const { shadow, ...live } = patch;
  if (shadow === null) return { live, shadow: null };
  if (shadow === 'promote') {
    if (Object.keys(live).length > 0) throw shadowError('"promote" is sent alone: it sets the whole policy');
    return { live, shadow };
  }
  if (typeof shadow !== 'object' || Array.isArray(shadow))
    throw shadowError('must be a policy patch (an object), null (clear it) or "promote"');
  if ('forced_state' in shadow)
    throw new AppError('VALIDATION_FAILED', 'The policy patch has invalid fields; nothing was changed.', {
      fields: [{ field: 'shadow.forced_state', message: 'a shadow policy is never forced' }],
    });
  return { live, shadow: shadow as Record<string, unknown> };
}

function shadowError(message: string): AppError {
  return new AppError('VALIDATION_FAILED', 'The shadow policy patch is invalid; nothing was changed.', {
    fields: [{ field: 'shadow', message }],
  });
}

/**
 * `base` with `patch` merged over it and checked whole, as PATCH does it (the backtest's
 * proposed policy is made here too); a VALIDATION_FAILED naming each field (prefixed: `shadow.`)
 * when it breaks a rule, its message saying `what` was checked.
 */
export function mergedPolicy(
  base: CircuitPolicy,
  defaults: CircuitPolicy,
  patch: Record<string, unknown>,
  what = 'The policy patch',
  prefix = '',
): CircuitPolicy {
  const merged = policySchema.safeParse(patchedPolicy(base, defaults, patch));
  if (!merged.success) {
    throw new AppError('VALIDATION_FAILED', `${what} has invalid fields; nothing was changed.`, {
      fields: policyFieldErrors(merged.error.issues).map((f) => ({ ...f, field: `${prefix}${f.field}` })),
    });
  }
  return policyFromWire(merged.data);
}

/** The audit action of a PATCH that sets, clears or promotes a shadow policy. */
function shadowAction(shadow: Record<string, unknown> | null | 'promote'): AuditAction {
  return shadow === 'promote' ? 'shadow_promoted' : shadow === null ? 'shadow_cleared' : 'shadow_set';
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

/**
 * `PATCH /circuits/{name}`: a JSON merge patch of the policy, merged inside the store's write;
 * with an audit log, one entry once the change is committed (`audit/audit-values.ts` names it).
 */
export function registerPolicyRoutes(
  app: OpenAPIHono,
  breaker: BreakerService,
  bodyLimitBytes: number,
  audit?: AuditLog,
): void {
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
    requireScope(c, patchScope(patch), 'PATCH /circuits/{name}');
    await newCircuitQuota(c, breaker, [name]);
    const { live, shadow } = splitShadow(patch);
    // The merge runs inside the store's write transaction, on the circuit as stored.
    const { circuit, created, before } = await breaker.withRoom([name], async () =>
      breaker.configure(
        name,
        (current): PolicyChange => {
          if (shadow === 'promote') {
            const promoted = current === null ? null : promotedPolicy(current);
            if (promoted === null) throw shadowError('there is no shadow policy to promote');
            return { policy: promoted, shadow: null };
          }
          const defaults = breaker.defaults;
          const policy = mergedPolicy(current === null ? defaults : policyOf(current), defaults, live);
          if (shadow === undefined || shadow === null) return { policy, shadow };
          // The shadow's patch is merged over the live policy (as this PATCH leaves it).
          return { policy, shadow: mergedPolicy(policy, defaults, shadow, 'The policy patch', 'shadow.') };
        },
        identityOf(c).id,
      ),
    );
    const change = patchChange(created ? null : before, circuit);
    await auditRequest(audit, c, {
      at: breaker.now(),
      circuit: name,
      ...change,
      ...(created || shadow === undefined ? {} : { action: shadowAction(shadow) }),
    });
    const headers = created ? { location: `/circuits/${encodeURIComponent(name)}` } : undefined;
    return json(c, circuitJson(circuit, breaker.now()), created ? 201 : 200, headers);
  });
}
