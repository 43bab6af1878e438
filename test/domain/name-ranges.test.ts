import { describe, expect, it } from 'vitest';
import { nameRanges } from '../../src/domain/circuit-name.js';

const inRanges = (ranges: [string, string][], name: string) =>
  ranges.filter(([from, to]) => name >= from && name < to).length;

describe('nameRanges (max_new_circuits counted through an index)', () => {
  it('matches exactly the names the patterns match, each once', () => {
    const ranges = nameRanges(['payments/*', 'payments/charge', 'payments/eu/*', 'orders', 'orders', 'a*', 'ab*']);
    expect(ranges).toHaveLength(3); // payments/*, orders, a*
    const names = [
      'payments/charge',
      'payments/eu/x',
      'payments',
      'paymentsX',
      'orders',
      'orders/1',
      'ordersx',
      'ab',
      'a',
      'b',
    ];
    expect(names.map((n) => inRanges(ranges, n))).toEqual([1, 1, 0, 0, 1, 0, 0, 1, 1, 0]);
  });

  it('is empty for no pattern, and one range for every name', () => {
    expect(nameRanges([])).toEqual([]);
    const all = nameRanges(['*']);
    expect(['a', 'z/y', '~'].map((n) => inRanges(all, n))).toEqual([1, 1, 1]);
  });
});
