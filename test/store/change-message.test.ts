import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { messageFields } from '../../src/store/redis/change-subscription.js';

// A `changes` message is `<version>\n<id>\n<name>\n<json>`; it is cut at its first three
// newlines, which must answer what splitting at every newline and joining the rest answered.
function reference(message: string) {
  const [v, id, name, ...rest] = message.split('\n');
  return [v, id, name, rest.join('\n')];
}

describe('messageFields', () => {
  it('cuts a message as split-and-join would, for any text and any number of newlines', () => {
    const text = fc
      .array(fc.oneof(fc.constant('\n'), fc.string({ maxLength: 5 })), { maxLength: 12 })
      .map((p) => p.join(''));
    fc.assert(
      fc.property(text, (message) => {
        expect(messageFields(message)).toEqual(reference(message));
      }),
      { numRuns: 3_000 },
    );
    for (const m of [
      '',
      '\n',
      '\n\n',
      '\n\n\n',
      '7\n1\nx\n{"a":1}',
      '7\n1\nx\n',
      '7\n1\nx',
      '7\n1',
      '7',
      '7\n1\nx\n{\n}\n',
    ])
      expect(messageFields(m)).toEqual(reference(m));
  });
});
