import { describe, expect, it } from 'vitest';
import { isOutcomeKind, OUTCOME_KINDS, rampAdmits, rampPercent } from '../../src/domain/outcome-kind.js';
import { kindOfStatus, retryAfterSeconds } from '../../src/domain/outcome-rules.js';

const NOW = Date.parse('2026-12-04T12:00:00.000Z');

describe('outcome kinds', () => {
  it('knows the six kinds and nothing else', () => {
    expect(OUTCOME_KINDS).toEqual(['success', 'failure', 'rejected', 'throttled', 'caller_deadline', 'cancelled']);
    for (const k of OUTCOME_KINDS) expect(isOutcomeKind(k)).toBe(true);
    for (const k of ['Success', 'timeout', '', 1, null, undefined, 'toString']) expect(isOutcomeKind(k)).toBe(false);
  });

  it('classifies HTTP answers by the issue 29 table', () => {
    const kind = (status: number, ra: string | null = null) => kindOfStatus(status, ra, NOW).kind;
    expect([200, 201, 204, 301, 304].map((s) => kind(s))).toEqual(Array(5).fill('success'));
    expect([500, 502, 503, 504, 599].map((s) => kind(s))).toEqual(Array(5).fill('failure'));
    expect(kind(408)).toBe('failure');
    expect([400, 401, 403, 404, 409, 422, 501, 505].map((s) => kind(s))).toEqual(Array(8).fill('rejected'));
    expect(kindOfStatus(429, null, NOW)).toEqual({ kind: 'throttled', retryAfterSeconds: null });
    expect(kindOfStatus(429, '3', NOW)).toEqual({ kind: 'throttled', retryAfterSeconds: 3 });
    expect(kindOfStatus(503, '7', NOW)).toEqual({ kind: 'throttled', retryAfterSeconds: 7 });
    expect(kind(503, '')).toBe('failure');
  });

  it('reads Retry-After as delay-seconds or an HTTP-date (RFC 9110 10.2.3)', () => {
    expect(retryAfterSeconds('120', NOW)).toBe(120);
    expect(retryAfterSeconds(' 0 ', NOW)).toBe(0);
    expect(retryAfterSeconds('Fri, 04 Dec 2026 12:00:05 GMT', NOW)).toBe(5);
    expect(retryAfterSeconds('Fri, 04 Dec 2026 11:00:00 GMT', NOW)).toBe(0);
    expect(retryAfterSeconds('Friday, 04-Dec-26 12:01:00 GMT', NOW)).toBe(60);
    for (const bad of [null, undefined, '', '-1', '1.5', 'soon', '2026-12-04', '12345678901']) {
      expect(retryAfterSeconds(bad, NOW)).toBeNull();
    }
  });

  it('ramps linearly from the start percent to 100 over the ramp', () => {
    const until = NOW + 10_000;
    expect(rampPercent(until, 10, 10, NOW)).toBe(10);
    expect(rampPercent(until, 10, 10, NOW + 5_000)).toBe(55);
    expect(rampPercent(until, 10, 10, NOW + 9_000)).toBeCloseTo(91);
    expect(rampPercent(until, 10, 10, until)).toBe(100);
    expect(rampPercent(null, 10, 10, NOW)).toBe(100);
    expect(rampPercent(until, 10, 10, NOW - 1_000)).toBe(10);
  });

  it('admits a draw below the share', () => {
    expect(rampAdmits(25, 0.2499)).toBe(true);
    expect(rampAdmits(25, 0.25)).toBe(false);
    expect(rampAdmits(100, 0.9999)).toBe(true);
    expect(rampAdmits(0, 0)).toBe(false);
  });
});
