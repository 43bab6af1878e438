import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, circuitNameProblem, loadConfig, parseConfigText } from '../src/config.js';

describe('configuration', () => {
  it('has secure, documented defaults', () => {
    const config = loadConfig({}, []);
    expect(config).toMatchObject({ port: 8080, host: '127.0.0.1', dbPath: './data/circuitlog.db', workers: 1, synchronous: 'NORMAL', token: undefined });
    expect(config.circuit_defaults).toEqual({ failure_threshold: 5, timeout_seconds: 30, half_open_max_calls: 1, success_threshold: 1, window: null, backoff: null, forced_state: null, probe_lease_seconds: 10 });
  });

  it('takes the worker count from CIRCUITLOG_WORKERS or --workers, auto meaning the CPU count', () => {
    expect(loadConfig({ CIRCUITLOG_WORKERS: '3' }, []).workers).toBe(3);
    expect(loadConfig({ CIRCUITLOG_WORKERS: '3' }, ['--workers', '2']).workers).toBe(2);
    expect(loadConfig({}, ['--workers=auto']).workers).toBe(os.availableParallelism());
    expect(() => loadConfig({}, ['--workers', 'many'])).toThrow(/--workers/);
    expect(() => loadConfig({ CIRCUITLOG_WORKERS: '0' }, [])).toThrow(/CIRCUITLOG_WORKERS/);
    expect(() => loadConfig({}, ['--port', '1'])).toThrow(ConfigError);
  });

  it('names the variable or key that is wrong', () => {
    expect(() => loadConfig({ CIRCUITLOG_SYNCHRONOUS: 'OFF' }, [])).toThrow(/CIRCUITLOG_SYNCHRONOUS/);
    expect(() => parseConfigText('upstreams:\n  users:\n    nodes: []\n', 'f')).toThrow(/upstreams\.users\.nodes/);
    expect(() => parseConfigText('upstreams:\n  users:\n    nodes: [{ id: a, dc: d, url: "ftp://x" }]\nlocal_dc: d\n', 'f')).toThrow(/nodes\[0\]\.url/);
    expect(() => parseConfigText('circuit_defaults:\n  failure_treshold: 3\n', 'f')).toThrow(/circuit_defaults/);
    expect(() => parseConfigText('[unclosed', 'f')).toThrow(/not valid YAML/);
  });

  it('accepts exactly the documented circuit names', () => {
    for (const ok of ['a', 'payment-gateway/charge', 'email-svc/transactional', 'a.b/c_d:e~f', 'x'.repeat(200)]) expect(circuitNameProblem(ok)).toBeNull();
    for (const bad of ['', '/a', 'a/', 'a//b', 'a/../b', '.', 'a/.', 'a b', 'é', 'x'.repeat(201)]) expect(circuitNameProblem(bad)).not.toBeNull();
  });
});
