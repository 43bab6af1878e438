/** The config file's policy sections: `circuit_defaults`, `circuits:`, and the policy fields of an upstream. */
import { z } from 'zod';
import { POLICY_DEFAULTS } from '../domain/policy-defaults.js';
import { checkPolicy, kindFields, policyFields } from '../policy-schema.js';
import { positiveInt } from './fields.js';

const defaults = POLICY_DEFAULTS.circuit;

/** `circuit_defaults`: every policy field (defaults from `POLICY_DEFAULTS`) and the probe lease. */
export const circuitDefaultsSchema = z
  .object({
    failure_threshold: policyFields.failure_threshold.default(defaults.failureThreshold),
    timeout_seconds: policyFields.timeout_seconds.default(defaults.timeoutSeconds), // at most 30 days
    half_open_max_calls: policyFields.half_open_max_calls.default(defaults.halfOpenMaxCalls),
    success_threshold: policyFields.success_threshold.default(defaults.successThreshold),
    window: policyFields.window.default(defaults.window),
    backoff: policyFields.backoff.default(defaults.backoff),
    forced_state: policyFields.forced_state.default(defaults.forcedState),
    throttle: policyFields.throttle.default(defaults.throttle),
    quorum: policyFields.quorum, // absent: none
    ...kindFields, // absent: their defaults (issue 29)
    history: policyFields.history, // absent: on (issue 31)
    probe_lease_seconds: positiveInt(86_400).default(POLICY_DEFAULTS.probeLeaseSeconds), // at most 1 day
  })
  .strict()
  .superRefine(checkPolicy);

/** Policy fields an upstream may set besides its thresholds; the rest come from elsewhere. */
export const policyOverrides = {
  success_threshold: policyFields.success_threshold.optional(),
  window: policyFields.window.optional(),
  backoff: policyFields.backoff.optional(),
  forced_state: policyFields.forced_state.optional(),
  throttle: policyFields.throttle.optional(),
  quorum: policyFields.quorum,
  ...kindFields,
  history: policyFields.history,
};

const { forced_state: _forced, ...shadowFields } = policyFields;

/** A declared circuit's `shadow` (issue 31): policy fields over the circuit's own (never `forced_state`); null clears it. */
const declaredShadowSchema = z
  .object({ ...shadowFields, ...kindFields })
  .partial()
  .strict();

/** `circuits:` entries: any policy fields, over `circuit_defaults`, and a shadow policy over those. */
export const declaredCircuitSchema = z
  .object({ ...policyFields, ...kindFields, shadow: declaredShadowSchema.nullable() })
  .partial()
  .strict();
