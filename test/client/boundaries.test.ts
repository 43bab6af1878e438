import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalBreakers } from '../../src/client/local-breaker.js';

describe('client boundaries', () => {
  it('imports only domain/, undici and node: modules: nothing of the server, no copy of the state machine', () => {
    const dir = 'src/client';
    for (const file of fs.readdirSync(dir)) {
      const text = fs.readFileSync(path.join(dir, file), 'utf8');
      const imports = [...text.matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
      for (const spec of imports) expect(`${file}: ${spec}`).toMatch(/: (\.\/|\.\.\/domain\/|undici$|node:)/);
    }
    expect(fs.readFileSync(path.join(dir, 'local-breaker.ts'), 'utf8')).toMatch(/from '\.\.\/domain\/circuit\.js'/);
  });
});

describe('local breaker', () => {
  const defaults = { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 };

  it('starts a circuit last known open as open until its known open_until, then admits one probe', () => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const local = new LocalBreakers(() => now, defaults, 10_000);
    const known = { state: 'open' as const, json: { open_until: '2030-01-01T00:00:20Z', half_open_max_calls: 1 } };
    expect(local.admit('svc', known)).toEqual({ allowed: false, retryAt: Date.parse('2030-01-01T00:00:20Z') });
    now += 20_000;
    expect(local.admit('svc', known)).toEqual({ allowed: true });
    expect(local.admit('svc', known).allowed).toBe(false); // the single probe slot is taken
    local.record('svc', true, undefined, known);
    expect(local.state('svc')).toBe('closed');
  });

  it('uses the policy circuitlog last showed, defaults where a field is missing', () => {
    const local = new LocalBreakers(() => 0, defaults, 10_000);
    const known = { state: 'closed' as const, json: { failure_threshold: 2 } };
    local.record('svc', false, undefined, known);
    expect(local.state('svc')).toBe('closed');
    local.record('svc', false, undefined, known);
    expect(local.state('svc')).toBe('open');
    expect(local.admit('svc', known)).toEqual({ allowed: false, retryAt: 30_000 });
  });

  it('judges the failure-rate window circuitlog showed, and a late outcome changes no state', () => {
    const local = new LocalBreakers(() => 0, defaults, 10_000);
    const known = {
      state: 'closed' as const,
      json: { failure_threshold: 100, window: { type: 'count', size: 4, failure_rate_threshold: 50 } },
    };
    for (const success of [true, false, true]) local.record('svc', success, 1, known);
    expect(local.state('svc')).toBe('closed'); // 3 of 4 minimum calls
    local.record('svc', false, 1, known);
    expect(local.state('svc')).toBe('open'); // 2 failures of 4: 50 %
    local.record('svc', true, 1, known);
    expect(local.state('svc')).toBe('open');
  });

  it('closes a half-open circuit only after success_threshold probes succeed', () => {
    let now = 0;
    const local = new LocalBreakers(() => now, defaults, 10_000);
    const known = {
      state: 'open' as const,
      json: { success_threshold: 2, half_open_max_calls: 2, open_until: new Date(1_000).toISOString() },
    };
    now = 1_000;
    expect(local.admit('svc', known).allowed).toBe(true);
    local.record('svc', true, 1, known);
    expect(local.state('svc')).toBe('half_open');
    local.record('svc', true, 1, known);
    expect(local.state('svc')).toBe('closed');
  });
});
