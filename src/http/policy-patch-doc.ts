/**
 * `PolicyPatch` in the OpenAPI document, derived from the policy's own zod fields
 * (policy-schema.ts) so the document and the server cannot drift: a closed object of the
 * policy fields, each nullable, objects with every member optional (RFC 7396 merges them).
 */
import { z } from 'zod';
import { policyFields } from '../policy-schema.js';

type JsonSchema = Record<string, unknown>;

const isNullable = (s: JsonSchema): boolean =>
  s.type === 'null' || (Array.isArray(s.anyOf) && (s.anyOf as JsonSchema[]).some(isNullable));

/** Every object's members optional, at any depth: a merge patch may send any of them. */
function membersOptional(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(membersOptional);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(schema)) if (key !== 'required') out[key] = membersOptional(value);
  return out;
}

/** One top-level field: its wire schema, null allowed (none, or back to the default). */
function patchField(field: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...schema } = z.toJSONSchema(field, { io: 'input', unrepresentable: 'any' });
  const patch = membersOptional(schema) as JsonSchema;
  return isNullable(patch) ? patch : { anyOf: [patch, { type: 'null' }] };
}

/** `shadow` (issue 31): a patch of the live policy without `forced_state`, null, or `promote`. */
function shadowField(): JsonSchema {
  const fields = Object.entries(policyFields).filter(([name]) => name !== 'forced_state');
  return {
    description:
      'The shadow policy (run beside the live one on every outcome, without acting on it): a merge patch of the live policy (every policy field but forced_state), null to clear it, or "promote" (sent alone) to make it the live policy and clear it.',
    anyOf: [
      {
        type: 'object',
        properties: Object.fromEntries(fields.map(([name, field]) => [name, patchField(field)])),
        additionalProperties: false,
      },
      { type: 'null' },
      { type: 'string', enum: ['promote'] },
    ],
  };
}

/** The JSON Schema of a policy merge patch (with the shadow policy's member). */
export function policyPatchSchema(): JsonSchema {
  const fields = policyFieldsPatchSchema();
  return { ...fields, properties: { ...(fields.properties as JsonSchema), shadow: shadowField() } };
}

/** The JSON Schema of a merge patch of the policy's own fields (a backtest's proposed policy). */
export function policyFieldsPatchSchema(): JsonSchema {
  return {
    type: 'object',
    description:
      "JSON merge patch (RFC 7396) of the policy. A field sent as null means none for window, backoff, forced_state, throttle and quorum, and the default for the others; inside an object a null member returns to its default. The patched policy must hold as a whole (a new window needs type and size; minimum_calls at most a count window's size; a time window's size at most 3600; max_callers at least min_callers; backoff's max_timeout_seconds at least timeout_seconds), else 422.",
    properties: {
      ...Object.fromEntries(Object.entries(policyFields).map(([name, field]) => [name, patchField(field)])),
    },
    additionalProperties: false,
    example: { success_threshold: 2, window: { type: 'count', size: 20, failure_rate_threshold: 50 } },
  };
}
