import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../src/config.js';

// Issue 31: a circuit declared under `circuits:` may declare a shadow policy over its own.

describe('a declared shadow policy', () => {
  it('is read as policy fields over the circuit\u2019s own, or null', () => {
    const config = parseConfigText(
      'circuits:\n  svc:\n    failure_threshold: 5\n    shadow:\n      failure_threshold: 2\n  other:\n    shadow: null\n',
      'f',
    );
    expect(config.circuits.svc).toEqual({ failure_threshold: 5, shadow: { failure_threshold: 2 } });
    expect(config.circuits.other).toEqual({ shadow: null });
  });

  it('is checked whole, each bad field named under shadow; it is never forced', () => {
    expect(() => parseConfigText('circuits:\n  svc:\n    shadow:\n      failure_threshold: 0\n', 'f')).toThrow(
      /circuits\.svc\.shadow\.failure_threshold/,
    );
    expect(() =>
      parseConfigText(
        'circuits:\n  svc:\n    shadow:\n      window: { type: count, size: 5, minimum_calls: 9 }\n',
        'f',
      ),
    ).toThrow(/circuits\.svc\.shadow\.window\.minimum_calls/);
    expect(() => parseConfigText('circuits:\n  svc:\n    shadow:\n      forced_state: open\n', 'f')).toThrow(
      /circuits\.svc\.shadow/,
    );
  });
});
