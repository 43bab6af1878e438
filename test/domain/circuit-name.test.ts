import { describe, expect, it } from 'vitest';
import {
  CIRCUIT_NAME_SEGMENT,
  SEGMENT_MAX_LENGTH,
  circuitNameProblem,
  isDotSegment,
  nodeCircuitName,
} from '../../src/domain/circuit-name.js';

describe('circuit-name rules', () => {
  it("names a node's circuit <upstream>/<node id>", () => {
    expect(nodeCircuitName('payments', 'eu-1')).toBe('payments/eu-1');
  });

  it('makes a valid circuit name of the longest upstream name and node id', () => {
    const segment = 'a'.repeat(SEGMENT_MAX_LENGTH);
    expect(circuitNameProblem(nodeCircuitName(segment, segment))).toBeNull();
  });

  it('accepts as a segment exactly the characters a circuit name segment may hold', () => {
    for (const ok of ['a', 'A-z_0.9:~', '..x']) {
      expect(CIRCUIT_NAME_SEGMENT.test(ok)).toBe(true);
      expect(circuitNameProblem(ok)).toBeNull();
    }
    for (const bad of ['', 'a/b', 'a b', 'é']) expect(CIRCUIT_NAME_SEGMENT.test(bad)).toBe(false);
  });

  it("tells '.' and '..' apart from other segments", () => {
    expect([isDotSegment('.'), isDotSegment('..'), isDotSegment('...'), isDotSegment('.a')]).toEqual([
      true,
      true,
      false,
      false,
    ]);
    expect(circuitNameProblem(nodeCircuitName('api', '..'))).toBe("must not have '.' or '..' segments");
  });
});
