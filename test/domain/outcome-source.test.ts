import { describe, expect, it } from 'vitest';
import { newCircuit } from '../../src/domain/circuit.js';
import { MAX_SOURCES, SOURCE_MEMORY_MS, seenBefore, withSourceMark } from '../../src/domain/outcome-source.js';

// Issue 32: what a circuit remembers of the sources that number their outcomes (outcome-source.ts).
describe('outcome sources', () => {
  const t0 = Date.parse('2026-12-05T00:00:00Z');
  const base = newCircuit('svc', { failureThreshold: 5, timeoutSeconds: 30, halfOpenMaxCalls: 1 }, t0);

  it('knows a number applied, and every lower one, of that source only', () => {
    const c = withSourceMark(base, 'edge-aaaaaaaa', 7, t0);
    expect(seenBefore(c, 'edge-aaaaaaaa', 7)).toBe(true);
    expect(seenBefore(c, 'edge-aaaaaaaa', 3)).toBe(true);
    expect(seenBefore(c, 'edge-aaaaaaaa', 8)).toBe(false);
    expect(seenBefore(c, 'edge-bbbbbbbb', 1)).toBe(false);
    expect(seenBefore(base, 'edge-aaaaaaaa', 1)).toBe(false);
  });

  it(`remembers the ${MAX_SOURCES} most recent sources, each for ${SOURCE_MEMORY_MS / 60_000} minutes`, () => {
    let c = base;
    for (let i = 0; i <= MAX_SOURCES; i++) c = withSourceMark(c, `edge-source-${i}`, 1, t0 + i);
    expect(c.sources).toHaveLength(MAX_SOURCES);
    expect(seenBefore(c, 'edge-source-0', 1)).toBe(false); // the oldest went first
    expect(seenBefore(c, `edge-source-${MAX_SOURCES}`, 1)).toBe(true);
    const later = withSourceMark(c, 'edge-source-new', 1, t0 + MAX_SOURCES + SOURCE_MEMORY_MS);
    expect(later.sources!.map((m) => m[0])).toEqual(['edge-source-new']);
  });
});
