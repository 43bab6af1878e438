import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry, type HistoryEntry } from '../../src/domain/history.js';
import { resolvePolicy } from '../../src/domain/policy.js';

const T = 1_700_000_000_000;

describe('the history codec (domain/history.ts)', () => {
  const policy = resolvePolicy({ failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 });
  const entries: HistoryEntry[] = [
    { type: 'outcome', t: T, outcome: { success: false } },
    { type: 'outcome', t: T, outcome: { success: true } },
    {
      type: 'outcome',
      t: T,
      outcome: {
        success: false,
        kind: 'throttled',
        durationMs: 12.5,
        caller: 'checkout/a',
        at: T - 40,
        timeoutSeconds: 9,
        late: 'count_only',
        retryAfterSeconds: 3,
        deadlineMs: 50,
        voter: 'checkout',
      },
    },
    { type: 'outcome', t: T, outcome: { success: true, kind: 'rejected', caller: 'x' } },
    { type: 'manual', t: T, action: 'reset', by: 'oncall' },
    { type: 'manual', t: T, action: 'configure', before: null, after: policy },
    {
      type: 'manual',
      t: T,
      action: 'configure',
      by: 'deploy',
      before: policy,
      after: { ...policy, forcedState: 'open' },
    },
    {
      type: 'transition',
      t: T,
      transition: { from: 'closed', to: 'open', reason: 'failure_threshold_reached', at: T },
    },
    {
      type: 'transition',
      t: T,
      transition: {
        from: 'closed',
        to: 'closed',
        reason: 'trip_withheld',
        at: T,
        callers: ['a'],
        rule: 'failure_rate_exceeded',
      },
    },
  ];

  it('reads back every entry it wrote', () => {
    for (const e of entries) expect(decodeEntry(e.t, encodeEntry(e))).toEqual(e);
  });

  it('keeps a bare outcome to a few bytes, and an HTTP route outcome (count_only) to a few more', () => {
    expect(encodeEntry(entries[0]!)).toBe('[0]');
    expect(encodeEntry(entries[1]!)).toBe('[1]');
    const http: HistoryEntry = {
      type: 'outcome',
      t: T,
      outcome: { success: true, durationMs: 12.5, late: 'count_only' },
    };
    expect(encodeEntry(http)).toBe('["1k",12.5]');
    expect(decodeEntry(T, '["1k",12.5]')).toEqual(http);
    const circuitlog: HistoryEntry = {
      type: 'outcome',
      t: T,
      outcome: { success: false, kind: 'failure', late: 'circuitlog' },
    };
    expect(decodeEntry(T, encodeEntry(circuitlog))).toEqual(circuitlog);
  });

  it('answers null for text that is not an entry', () => {
    for (const text of [
      '',
      'x',
      '[]',
      '{}',
      '["2"]',
      '[3]',
      '["0z"]',
      '["m","drop"]',
      '["x","closed","gone","r",1]',
      '["x","closed","open","r","soon"]',
    ])
      expect(decodeEntry(T, text)).toBeNull();
  });
});
