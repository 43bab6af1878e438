import os from 'node:os';
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import {
  ConfigError,
  circuitNameProblem,
  configDefinedCircuit,
  describeConfig,
  loadConfig,
  parseConfigText,
} from '../src/config.js';
import { tempDir } from './server-process.js';

const upstream = (url: string, extra = '') =>
  `local_dc: dc1\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "${url}" }]\n${extra}`;

describe('configuration', () => {
  it('has secure, documented defaults', () => {
    const config = loadConfig({}, []);
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      dbPath: './data/circuitlog.db',
      workers: 1,
      synchronous: 'NORMAL',
      token: undefined,
    });
    expect(config.circuit_defaults).toEqual({
      failure_threshold: 5,
      timeout_seconds: 30,
      half_open_max_calls: 1,
      success_threshold: 1,
      window: null,
      backoff: null,
      forced_state: null,
      throttle: null,
      probe_lease_seconds: 10,
    });
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
    expect(() =>
      parseConfigText('upstreams:\n  users:\n    nodes: [{ id: a, dc: d, url: "ftp://x" }]\nlocal_dc: d\n', 'f'),
    ).toThrow(/nodes\[0\]\.url/);
    expect(() => parseConfigText('circuit_defaults:\n  failure_treshold: 3\n', 'f')).toThrow(/circuit_defaults/);
    expect(() => parseConfigText('[unclosed', 'f')).toThrow(/not valid YAML/);
  });

  it('accepts exactly the documented circuit names', () => {
    for (const ok of ['a', 'payment-gateway/charge', 'email-svc/transactional', 'a.b/c_d:e~f', 'x'.repeat(200)])
      expect(circuitNameProblem(ok)).toBeNull();
    for (const bad of ['', '/a', 'a/', 'a//b', 'a/../b', '.', 'a/.', 'a b', 'é', 'x'.repeat(201)])
      expect(circuitNameProblem(bad)).not.toBeNull();
  });

  it('refuses a malformed node url with a message, not a crash', () => {
    for (const url of ['not a url', 'http://127.0.0.1:99999', 'http://']) {
      expect(() => parseConfigText(upstream(url), 'f')).toThrow(ConfigError);
      expect(() => parseConfigText(upstream(url), 'f')).toThrow(
        /f upstreams\.users\.nodes\[0\]\.url: must be an http:\/\/ or https:\/\/ URL with a valid host and port/,
      );
    }
    expect(() => parseConfigText(upstream('http://127.0.0.1:8080/base?x=1'), 'f')).toThrow(
      /nodes\[0\]\.url: must not have a query/,
    );
    expect(parseConfigText(upstream('http://127.0.0.1:8080/base'), 'f').upstreams.users?.nodes[0]?.url).toBe(
      'http://127.0.0.1:8080/base',
    );
  });

  it('refuses fallback.static.headers that node:http would reject on every answer', () => {
    const withHeaders = (headers: string) =>
      upstream('http://127.0.0.1:1', `    fallback:\n      static:\n        headers: ${headers}\n`);
    expect(() => parseConfigText(withHeaders('{ "bad name": "x" }'), 'f')).toThrow(
      /f upstreams\.users\.fallback\.static\.headers\.bad name: /,
    );
    expect(() => parseConfigText(withHeaders('{ "x-ok": "line\\nbreak" }'), 'f')).toThrow(/static\.headers\.x-ok: /);
    expect(parseConfigText(withHeaders('{ "x-ok": "fine" }'), 'f').upstreams.users?.fallback?.static?.headers).toEqual({
      'x-ok': 'fine',
    });
  });

  it('refuses a local_dc that matches no node of some upstream, naming both', () => {
    const text =
      'local_dc: dc1\nupstreams:\n  users:\n    nodes: [{ id: a, dc: dc1, url: "http://127.0.0.1:1" }]\n  orders:\n    nodes: [{ id: b, dc: dc2, url: "http://127.0.0.1:2" }]\n';
    expect(() => parseConfigText(text, 'f')).toThrow(
      "f local_dc: 'dc1' matches no node of upstream 'orders' (its data centres: dc2)",
    );
  });

  it('refuses an empty config file, naming CIRCUITLOG_CONFIG', () => {
    const file = path.join(tempDir(), 'empty.yaml');
    for (const text of ['', '# only a comment\n']) {
      fs.writeFileSync(file, text);
      expect(() => loadConfig({ CIRCUITLOG_CONFIG: file }, [])).toThrow(`CIRCUITLOG_CONFIG ${file}: the file is empty`);
    }
  });

  it('refuses a token with leading or trailing whitespace', () => {
    for (const token of [' token-0123456789abcdef', 'token-0123456789abcdef\t', 'token-0123456789abcdef ']) {
      expect(() => loadConfig({ CIRCUITLOG_TOKEN: token }, [])).toThrow(
        'CIRCUITLOG_TOKEN: must not begin or end with whitespace',
      );
    }
  });

  it('accepts auto, full and info in any case, and says auto in the workers message', () => {
    expect(loadConfig({ CIRCUITLOG_WORKERS: 'AUTO' }, []).workers).toBe(os.availableParallelism());
    expect(loadConfig({}, ['--workers', 'Auto']).workers).toBe(os.availableParallelism());
    expect(loadConfig({ CIRCUITLOG_SYNCHRONOUS: 'full' }, []).synchronous).toBe('FULL');
    expect(loadConfig({ CIRCUITLOG_LOG_LEVEL: 'INFO' }, []).logLevel).toBe('info');
    expect(() => loadConfig({ CIRCUITLOG_WORKERS: 'many' }, [])).toThrow(
      "CIRCUITLOG_WORKERS: must be an integer from 1 to 256 or 'auto'",
    );
  });

  it('never doubles the colon in a config error message', () => {
    expect.assertions(3);
    for (const text of ['just a string', '[1, 2]', 'server:\n  headers_timeout_ms: 0\n']) {
      try {
        parseConfigText(text, 'CIRCUITLOG_CONFIG f.yaml');
      } catch (error) {
        expect((error as Error).message).not.toMatch(/::/);
      }
    }
  });

  it('refuses a HOST that is neither an address nor a host name', () => {
    expect(() => loadConfig({ HOST: 'not_a_host' }, [])).toThrow(/^HOST: must be an IP address or a host name/);
    for (const ok of ['localhost', '::1', '127.0.0.1', '0.0.0.0', 'db-1.example.com'])
      expect(loadConfig({ HOST: ok }, []).host).toBe(ok);
  });

  it('has documented server timeouts, and headers may not outlast the whole request', () => {
    expect(loadConfig({}, []).server).toEqual({
      headers_timeout_ms: 10_000,
      request_timeout_ms: 60_000,
      keep_alive_timeout_ms: 5_000,
    });
    expect(() => parseConfigText('server:\n  headers_timeout_ms: 5000\n  request_timeout_ms: 1000\n', 'f')).toThrow(
      'f server.headers_timeout_ms: must not exceed server.request_timeout_ms',
    );
  });

  it('describes the running configuration without the token', () => {
    const config = loadConfig({ CIRCUITLOG_TOKEN: 'secret-0123456789abcdef', CIRCUITLOG_WORKERS: '2' }, []);
    const summary = describeConfig(config);
    expect(summary).toMatchObject({
      config_file: null,
      upstreams: [],
      token: 'on',
      workers: 2,
      synchronous: 'NORMAL',
      db: './data/circuitlog.db',
    });
    expect(JSON.stringify(summary)).not.toContain('secret-0123456789abcdef');
    expect(describeConfig(loadConfig({}, [])).token).toBe('off');
  });
});

describe('retention and limits keys', () => {
  it('defaults to 30 days and 1,000 transitions per circuit, idle deletion off and 1,000,000 circuits', () => {
    const config = loadConfig({}, []);
    expect(config.events.retention).toEqual({ max_age_days: 30, max_per_circuit: 1_000 });
    expect(config.limits).toEqual({ idle_circuit_days: null, max_circuits: 1_000_000 });
  });

  it('reads them and names a bad one', () => {
    const config = parseConfigText(
      'events: { retention: { max_age_days: 0, max_per_circuit: 50 } }\nlimits: { idle_circuit_days: 7, max_circuits: 10 }\n',
      'f',
    );
    expect(config.events.retention).toEqual({ max_age_days: 0, max_per_circuit: 50 });
    expect(config.limits).toEqual({ idle_circuit_days: 7, max_circuits: 10 });
    expect(() => parseConfigText('limits: { idle_circuit_days: 0 }\n', 'f')).toThrow(/limits\.idle_circuit_days/);
    expect(() => parseConfigText('limits: { max_circuit: 5 }\n', 'f')).toThrow(/limits/);
    expect(() => parseConfigText('events: { retention: { max_age_days: -1 } }\n', 'f')).toThrow(
      /events\.retention\.max_age_days/,
    );
  });

  it('counts declared circuits and proxy nodes as defined by the config (never deleted as idle)', () => {
    const config = parseConfigText(
      'circuits:\n  payments/charge: {}\nlocal_dc: dc1\nupstreams:\n  api:\n    nodes:\n      - { id: n1, dc: dc1, url: "http://127.0.0.1:9" }\n',
      'f',
    );
    const defined = configDefinedCircuit(config);
    expect(['payments/charge', 'api/n1', 'api/n2', 'other'].map(defined)).toEqual([true, true, false, false]);
  });
});
