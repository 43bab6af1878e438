import { describe, expect, it } from 'vitest';
import { describeConfig, loadConfig, parseConfigText } from '../src/config.js';

describe('policy keys in the config file', () => {
  it('takes every policy field in circuit_defaults', () => {
    const config = parseConfigText(
      'circuit_defaults:\n  success_threshold: 2\n  window: { type: time, size: 60, minimum_calls: 20 }\n  backoff: { multiplier: 1.5, max_timeout_seconds: 600 }\n  forced_state: closed\n',
      'f',
    );
    expect(config.circuit_defaults).toMatchObject({
      failure_threshold: 5,
      success_threshold: 2,
      window: { type: 'time', size: 60, minimum_calls: 20 },
      backoff: { multiplier: 1.5, max_timeout_seconds: 600 },
      forced_state: 'closed',
    });
  });

  it('names each bad key of circuit_defaults, circuits and upstream blocks', () => {
    expect(() => parseConfigText('circuit_defaults:\n  success_threshold: 0\n', 'f')).toThrow(
      /circuit_defaults\.success_threshold/,
    );
    expect(() =>
      parseConfigText('circuit_defaults:\n  timeout_seconds: 600\n  backoff: { max_timeout_seconds: 60 }\n', 'f'),
    ).toThrow(/circuit_defaults\.backoff\.max_timeout_seconds/);
    expect(() => parseConfigText('circuits:\n  "bad name":\n    failure_threshold: 2\n', 'f')).toThrow(
      /circuits\.bad name: circuit name/,
    );
    expect(() =>
      parseConfigText('circuits:\n  svc:\n    window: { type: count, size: 5, minimum_calls: 6 }\n', 'f'),
    ).toThrow(/circuits\.svc\.window\.minimum_calls/);
    expect(() => parseConfigText('circuits:\n  svc:\n    colour: red\n', 'f')).toThrow(/circuits\.svc/);
    expect(() =>
      parseConfigText(
        'local_dc: d\nupstreams:\n  u:\n    window: { type: count, size: 0 }\n    nodes: [{ id: a, dc: d, url: "http://127.0.0.1:1" }]\n',
        'f',
      ),
    ).toThrow(/upstreams\.u\.window\.size/);
  });

  it('checks a declared circuit against the defaults it is merged over', () => {
    expect(() =>
      parseConfigText(
        'circuit_defaults:\n  backoff: { max_timeout_seconds: 60 }\ncircuits:\n  svc:\n    timeout_seconds: 120\n',
        'f',
      ),
    ).toThrow(/circuits\.svc\.backoff\.max_timeout_seconds/);
  });

  it('turns group commit on or off with CIRCUITLOG_GROUP_COMMIT (default on)', () => {
    expect(loadConfig({}, []).groupCommit).toBe(true);
    expect(loadConfig({ CIRCUITLOG_GROUP_COMMIT: 'OFF' }, []).groupCommit).toBe(false);
    expect(() => loadConfig({ CIRCUITLOG_GROUP_COMMIT: 'maybe' }, [])).toThrow(/CIRCUITLOG_GROUP_COMMIT/);
    expect(describeConfig(loadConfig({ CIRCUITLOG_GROUP_COMMIT: 'off' }, []))).toMatchObject({
      group_commit: 'off',
      declared_circuits: 0,
    });
  });
});
