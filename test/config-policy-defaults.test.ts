import { describe, expect, it } from 'vitest';
import { parseConfigText, upstreamPolicy } from '../src/config.js';
import { POLICY_DEFAULTS } from '../src/domain/policy-defaults.js';
import { policyFromWire, policyToWire } from '../src/domain/policy-wire.js';
import { buildApp } from './helper.js';

const MERGE = { 'content-type': 'application/merge-patch+json' };
const UPSTREAM = 'local_dc: a\nupstreams:\n  api:\n    nodes: [{ id: n1, dc: a, url: "http://127.0.0.1:9" }]\n';

/** The app with the policy defaults the config gives, as main.ts wires them. */
function appFromConfig(text: string) {
  const { probe_lease_seconds: probeLeaseSeconds, ...defaults } = parseConfigText(text, 'test').circuit_defaults;
  return buildApp({ circuitDefaults: policyFromWire(defaults), policy: { probeLeaseMs: probeLeaseSeconds * 1000 } });
}

describe('the defaults table is what config and HTTP apply', () => {
  it('config: circuit_defaults left out are POLICY_DEFAULTS.circuit and its probe lease', () => {
    const { probe_lease_seconds, ...policy } = parseConfigText('{}', 'test').circuit_defaults;
    expect(policyFromWire(policy)).toEqual(POLICY_DEFAULTS.circuit);
    expect(probe_lease_seconds).toBe(POLICY_DEFAULTS.probeLeaseSeconds);
  });

  it("config: an upstream's node circuits default to the upstream failure threshold and the circuit table's open time and probes", () => {
    const api = parseConfigText(UPSTREAM, 'test').upstreams.api!;
    expect(api.failure_threshold).toBe(POLICY_DEFAULTS.upstreamFailureThreshold);
    expect(api.timeout_seconds).toBe(POLICY_DEFAULTS.circuit.timeoutSeconds);
    expect(api.half_open_max_calls).toBe(POLICY_DEFAULTS.circuit.halfOpenMaxCalls);
    expect(upstreamPolicy(api)).toEqual({
      ...POLICY_DEFAULTS.circuit,
      failureThreshold: POLICY_DEFAULTS.upstreamFailureThreshold,
    });
  });

  it("config: an upstream's own policy fields override the table", () => {
    const api = parseConfigText(
      `${UPSTREAM}    success_threshold: 4\n    forced_state: closed\n    backoff: {}\n`,
      'test',
    ).upstreams.api!;
    expect(upstreamPolicy(api)).toMatchObject({
      successThreshold: 4,
      forcedState: 'closed',
      backoff: { multiplier: POLICY_DEFAULTS.backoff.multiplier },
    });
  });

  it('HTTP: a circuit created with the config defaults answers the table in wire form', async () => {
    const t = appFromConfig('{}');
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    const body = (await (await t.request('GET', '/circuits/svc')).json()) as Record<string, unknown>;
    expect(body).toMatchObject(policyToWire(POLICY_DEFAULTS.circuit, true));
  });

  it('HTTP: a window and a backoff patched in with no members get the table defaults', async () => {
    const t = appFromConfig('{}');
    await t.request('POST', '/circuits/svc/outcomes', { success: true });
    const res = await t.request(
      'PATCH',
      '/circuits/svc',
      JSON.stringify({ window: { type: 'time', size: 60 }, backoff: {} }),
      MERGE,
    );
    expect(res.status).toBe(200);
    const body = (await (await t.request('GET', '/circuits/svc')).json()) as Record<string, unknown>;
    expect(body.window).toEqual({
      type: 'time',
      size: 60,
      minimum_calls: POLICY_DEFAULTS.window.timeMinimumCalls,
      failure_rate_threshold: POLICY_DEFAULTS.window.failureRateThreshold,
      slow_call_duration_ms: null,
      slow_call_rate_threshold: POLICY_DEFAULTS.window.slowCallRateThreshold,
    });
    expect(body.backoff).toEqual({
      multiplier: POLICY_DEFAULTS.backoff.multiplier,
      max_timeout_seconds: POLICY_DEFAULTS.backoff.maxTimeoutSeconds,
    });
  });
});
