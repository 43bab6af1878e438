import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../src/config.js';
import { upstreamPolicy } from '../src/config/upstream-schema.js';
import { policyFromWire } from '../src/domain/policy-wire.js';

// Issue 29's settings as code: circuit_defaults, circuits: and upstream blocks take them,
// validated like every policy field.

const UPSTREAM = 'local_dc: d\nupstreams:\n  u:\n    nodes: [{ id: a, dc: d, url: "http://127.0.0.1:1" }]\n';

describe("issue 29's settings in the config file", () => {
  it('takes them in circuit_defaults and circuits:, into the domain policy', () => {
    const config = parseConfigText(
      [
        'circuit_defaults:',
        '  min_deadline_ms: 500',
        '  count_as: { rejected: failure }',
        'circuits:',
        '  svc:',
        '    throttle_scope: caller',
        '    max_retry_after_seconds: 60',
        '    ramp: { seconds: 30 }',
        '',
      ].join('\n'),
      'f',
    );
    const { probe_lease_seconds: _lease, ...defaults } = config.circuit_defaults;
    expect(policyFromWire(defaults).kinds).toEqual({
      countAs: { rejected: 'failure' },
      minDeadlineMs: 500,
      maxRetryAfterSeconds: 300,
      throttleScope: null,
    });
    const svc = policyFromWire({ ...defaults, ...config.circuits.svc });
    expect(svc.kinds).toMatchObject({ throttleScope: 'caller', maxRetryAfterSeconds: 60, minDeadlineMs: 500 });
    expect(svc.ramp).toEqual({ seconds: 30, startPercent: 10 });
  });

  it('takes them in an upstream block, for its node circuits', () => {
    const config = parseConfigText(
      `${UPSTREAM}    min_deadline_ms: null\n    ramp: { seconds: 10, start_percent: 50 }\n`,
      'f',
    );
    const policy = upstreamPolicy(config.upstreams.u!);
    expect(policy.kinds).toMatchObject({ minDeadlineMs: null });
    expect(policy.ramp).toEqual({ seconds: 10, startPercent: 50 });
  });

  it('names each bad one', () => {
    expect(() => parseConfigText('circuit_defaults:\n  count_as: { timeout: failure }\n', 'f')).toThrow(
      /circuit_defaults\.count_as/,
    );
    expect(() => parseConfigText('circuits:\n  svc:\n    ramp: { seconds: 0 }\n', 'f')).toThrow(
      /circuits\.svc\.ramp\.seconds/,
    );
    expect(() => parseConfigText(`${UPSTREAM}    throttle_scope: host\n`, 'f')).toThrow(/upstreams\.u\.throttle_scope/);
  });
});
