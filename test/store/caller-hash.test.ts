import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { CallerEntry } from '../../src/domain/caller-state.js';
import { applyCallerDelta, callerDelta, parseCallerHash } from '../../src/store/redis/caller-hash.js';
import { deltaFields } from '../../src/store/redis/change-subscription.js';

const entry = (caller: string, failures: number): CallerEntry => [caller, failures, 1_000, null, null, 0, null];

/** A table, then what a domain step may make of it: entries kept (the same tuple), changed, seen again (moved last), gone, new. */
const tables = fc
  .uniqueArray(fc.string({ minLength: 1, maxLength: 4 }), { maxLength: 12 })
  .chain((callers) =>
    fc.tuple(
      fc.constant(callers.map((c) => entry(c, 1))),
      fc.array(fc.constantFrom('keep', 'change', 'again', 'drop'), {
        minLength: callers.length,
        maxLength: callers.length,
      }),
      fc.uniqueArray(fc.string({ minLength: 5, maxLength: 6 }), { maxLength: 4 }),
    ),
  )
  .map(([before, ops, added]) => {
    const after: CallerEntry[] = [];
    const again: CallerEntry[] = [];
    before.forEach((e, i) => {
      if (ops[i] === 'keep') after.push(e);
      else if (ops[i] === 'change') after.push(entry(e[0], 2));
      else if (ops[i] === 'again') again.push(entry(e[0], 3));
    });
    return { before, after: [...after, ...again, ...added.map((c) => entry(c, 1))] };
  });

describe('the Redis caller delta', () => {
  it('turns the table it was made from into the new one, for any step', () => {
    fc.assert(
      fc.property(tables, ({ before, after }) => {
        expect(applyCallerDelta(before, callerDelta(before, after, false))).toEqual(after);
        expect(applyCallerDelta([entry('stale', 9)], callerDelta(before, after, true))).toEqual(after);
      }),
      { numRuns: 2_000 },
    );
  });

  it('is empty when the table is the same, and malformed input gives null, never a throw', () => {
    const t = [entry('a', 1)];
    expect(callerDelta(t, t, false)).toBe('');
    expect(applyCallerDelta(t, '')).toBe(t);
    for (const bad of ['{', '[0]', '[0,[],[["a","[1]"]],[]]', '[0,[],[],[[1,"[1,null,null,null,0,null]"]]]'])
      expect(applyCallerDelta(t, bad)).toBeNull();
  });

  it('reads a hash back in order and names a malformed field', () => {
    const flat = ['b', '7:[2,1000,null,null,0,null]', 'a', '3:[1,1000,null,null,0,null]', 'x', 'nonsense'];
    const { entries, problem } = parseCallerHash(flat);
    expect(entries).toEqual([entry('a', 1), entry('b', 2)]);
    expect(problem).toContain('"x"');
  });

  it('cuts a message after its json into the version read and the delta; a message without them is json alone', () => {
    expect(deltaFields('{"a":1}\n41\n[0,[],[],[]]')).toEqual({
      json: '{"a":1}',
      readVersion: '41',
      delta: '[0,[],[],[]]',
    });
    expect(deltaFields('{"a":1}\n41\n')).toEqual({ json: '{"a":1}', readVersion: '41', delta: '' });
    expect(deltaFields('{"a":1}')).toEqual({ json: '{"a":1}' });
  });
});
