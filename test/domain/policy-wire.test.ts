import { describe, expect, it } from 'vitest';
import { POLICY_DEFAULTS } from '../../src/domain/policy-defaults.js';
import { policyFromJson, policyFromWire, policyToWire, type PolicyWire } from '../../src/domain/policy-wire.js';
import type { CircuitPolicy } from '../../src/domain/policy.js';
import { policySchema } from '../../src/policy-schema.js';

/** A policy with every field set, none to its default. */
const everyField: CircuitPolicy = {
  failureThreshold: 7,
  timeoutSeconds: 45,
  halfOpenMaxCalls: 3,
  successThreshold: 2,
  window: {
    type: 'count',
    size: 40,
    minimumCalls: 20,
    failureRateThreshold: 25.5,
    slowCallDurationMs: 750,
    slowCallRateThreshold: 80,
  },
  backoff: { multiplier: 1.5, maxTimeoutSeconds: 900 },
  forcedState: 'open',
  throttle: { k: 3, windowSeconds: 20 },
  history: false,
};

const throughJson = (wire: PolicyWire): PolicyWire => JSON.parse(JSON.stringify(wire)) as PolicyWire;

describe('the policy wire mapping', () => {
  it('round-trips a policy with every field set through JSON (display form)', () => {
    expect(policyFromWire(throughJson(policyToWire(everyField, true)))).toEqual(everyField);
  });

  it('round-trips a policy with every field set through JSON (merge-base form)', () => {
    expect(policyFromWire(throughJson(policyToWire(everyField, false)))).toEqual(everyField);
  });

  it('names every field in snake_case on the wire', () => {
    expect(policyToWire(everyField, true)).toEqual({
      failure_threshold: 7,
      timeout_seconds: 45,
      half_open_max_calls: 3,
      success_threshold: 2,
      window: {
        type: 'count',
        size: 40,
        minimum_calls: 20,
        failure_rate_threshold: 25.5,
        slow_call_duration_ms: 750,
        slow_call_rate_threshold: 80,
      },
      backoff: { multiplier: 1.5, max_timeout_seconds: 900 },
      forced_state: 'open',
      throttle: { k: 3, window_seconds: 20 },
      history: false,
    });
  });

  it('writes history only when off in a merge base, and always when resolved (issue 31)', () => {
    const { history: _off, ...on } = everyField;
    expect(policyToWire(on, true).history).toBe(true);
    expect('history' in policyToWire(on, false)).toBe(false);
    expect(policyToWire(everyField, false).history).toBe(false);
    expect(policyFromWire({ ...policyToWire(on, true), history: true })).toEqual(on);
  });

  it('round-trips the wire form the HTTP schema accepts (wire -> domain -> wire)', () => {
    const wire = policySchema.parse(policyToWire(everyField, true));
    expect(policyToWire(policyFromWire(wire), true)).toEqual(wire);
  });

  it('fills left-out window and backoff members from POLICY_DEFAULTS', () => {
    const p = policyFromWire({
      ...policyToWire(POLICY_DEFAULTS.circuit, true),
      timeout_seconds: 30,
      window: { type: 'time', size: 60 },
      backoff: {},
    });
    expect(p.window).toEqual({
      type: 'time',
      size: 60,
      minimumCalls: null,
      failureRateThreshold: POLICY_DEFAULTS.window.failureRateThreshold,
      slowCallDurationMs: null,
      slowCallRateThreshold: POLICY_DEFAULTS.window.slowCallRateThreshold,
    });
    expect(p.backoff).toEqual({
      multiplier: POLICY_DEFAULTS.backoff.multiplier,
      maxTimeoutSeconds: POLICY_DEFAULTS.backoff.maxTimeoutSeconds,
    });
  });

  it('fills left-out throttle members from POLICY_DEFAULTS, and reads a throttle left out as none', () => {
    const base = policyToWire(POLICY_DEFAULTS.circuit, true);
    expect(policyFromWire({ ...base, throttle: {} }).throttle).toEqual({
      k: POLICY_DEFAULTS.throttle.k,
      windowSeconds: POLICY_DEFAULTS.throttle.windowSeconds,
    });
    expect(policyFromWire({ ...base, throttle: { k: null, window_seconds: 5 } }).throttle).toEqual({
      k: 2,
      windowSeconds: 5,
    });
    const { throttle: _none, ...older } = base;
    expect(policyFromWire(older).throttle).toBeNull();
  });

  it("caps the default backoff at the base open time when that is longer than the table's cap", () => {
    const p = policyFromWire({ ...policyToWire(POLICY_DEFAULTS.circuit, true), timeout_seconds: 600, backoff: {} });
    expect(p.backoff?.maxTimeoutSeconds).toBe(600);
  });
});

describe('policyFromJson (the client reading a server)', () => {
  it('reads throttle leniently: members out of range take their defaults, a non-object is none, a missing one the fallback', () => {
    const fallback: CircuitPolicy = { ...everyField, forcedState: null };
    expect(policyFromJson({ throttle: { k: 0.5, window_seconds: 601 } }, fallback).throttle).toEqual({
      k: 2,
      windowSeconds: 60,
    });
    expect(policyFromJson({ throttle: 'on' }, fallback).throttle).toBeNull();
    expect(policyFromJson({}, fallback).throttle).toEqual(fallback.throttle);
  });

  it("reads issue 29's fields leniently: a malformed one takes its default, so the client counts as the server does", () => {
    const fallback: CircuitPolicy = { ...everyField, forcedState: null };
    const json = {
      count_as: { rejected: 'failure', cancelled: 'maybe', bogus: 'ignore' },
      min_deadline_ms: null,
      max_retry_after_seconds: -3,
      throttle_scope: 'caller',
      ramp: { seconds: 30, start_percent: 250 },
    };
    const p = policyFromJson(json, fallback);
    expect(p.kinds).toEqual({
      countAs: { rejected: 'failure' },
      minDeadlineMs: null,
      maxRetryAfterSeconds: POLICY_DEFAULTS.kinds.maxRetryAfterSeconds,
      throttleScope: 'caller',
    });
    expect(p.ramp).toEqual({ seconds: 30, startPercent: POLICY_DEFAULTS.ramp.startPercent });
    expect(policyFromJson({ ramp: { seconds: 0 } }, fallback).ramp).toBeUndefined();
  });

  it('reads a circuit JSON with every field set as the strict mapping does', () => {
    const json = { name: 'svc', state: 'closed', ...policyToWire(everyField, true) };
    expect(policyFromJson(json, POLICY_DEFAULTS.circuit)).toEqual(everyField);
  });

  it('takes the fallback for missing fields and the table defaults for malformed window members', () => {
    const fallback: CircuitPolicy = { ...everyField, forcedState: null };
    const json = { failure_threshold: 'x', window: { type: 'count', size: 10, failure_rate_threshold: -1 } };
    expect(policyFromJson(json, fallback)).toEqual({
      ...fallback,
      window: {
        type: 'count',
        size: 10,
        minimumCalls: null,
        failureRateThreshold: POLICY_DEFAULTS.window.failureRateThreshold,
        slowCallDurationMs: null,
        slowCallRateThreshold: POLICY_DEFAULTS.window.slowCallRateThreshold,
      },
    });
  });
});
