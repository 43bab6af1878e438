import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../src/config.js';
import { historySettings } from '../src/config/history-schema.js';
import { upstreamPolicy } from '../src/config/upstream-schema.js';
import { policyFromWire } from '../src/domain/policy-wire.js';

// Issue 31: the `history:` section and the per-circuit policy field `history` as code.

const UPSTREAM = 'local_dc: d\nupstreams:\n  u:\n    nodes: [{ id: a, dc: d, url: "http://127.0.0.1:1" }]\n';

describe('the history config (issue 31)', () => {
  it('defaults to on, 200,000 entries and 168 hours per circuit', () => {
    expect(historySettings(parseConfigText('{}', 'f').history)).toEqual({
      enabled: true,
      maxOutcomes: 200_000,
      maxAgeHours: 168,
    });
  });

  it('takes enabled, max_outcomes and max_age_hours', () => {
    const config = parseConfigText('history: { enabled: false, max_outcomes: 5000, max_age_hours: 24 }\n', 'f');
    expect(historySettings(config.history)).toEqual({ enabled: false, maxOutcomes: 5_000, maxAgeHours: 24 });
  });

  it('refuses an unknown member and bounds out of range, naming them', () => {
    expect(() => parseConfigText('history: { max_outcome: 5 }\n', 'f')).toThrow(/history.*max_outcome/);
    expect(() => parseConfigText('history: { max_outcomes: 0 }\n', 'f')).toThrow(/history\.max_outcomes/);
    expect(() => parseConfigText('history: { max_age_hours: 1.5 }\n', 'f')).toThrow(/history\.max_age_hours/);
    expect(() => parseConfigText('history: { enabled: "no" }\n', 'f')).toThrow(/history\.enabled/);
  });

  it('takes the policy field history in circuit_defaults, circuits: and an upstream block', () => {
    const config = parseConfigText(
      `${UPSTREAM}    history: false\ncircuit_defaults:\n  history: false\ncircuits:\n  svc:\n    history: true\n`,
      'f',
    );
    const { probe_lease_seconds: _lease, ...defaults } = config.circuit_defaults;
    expect(policyFromWire(defaults).history).toBe(false);
    expect(policyFromWire({ ...defaults, ...config.circuits.svc }).history).toBeUndefined(); // on: absent
    expect(upstreamPolicy(config.upstreams.u!).history).toBe(false);
    expect(upstreamPolicy(parseConfigText(UPSTREAM, 'f').upstreams.u!).history).toBeUndefined();
    expect(() => parseConfigText('circuits:\n  svc:\n    history: 1\n', 'f')).toThrow(/circuits\.svc\.history/);
  });
});
