import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SHARDS, shardOf } from '../../src/store/redis/shards.js';

// A circuit's shard is part of the key layout every host must compute alike: FNV-1a over the
// UTF-8 bytes of its name up to its last `/`. The reference below hashes the bytes, as the
// layout is defined; shardOf takes a shortcut for ASCII names and must answer the same.
function reference(name: string): number {
  const slash = name.lastIndexOf('/');
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(slash === -1 ? name : name.slice(0, slash), 'utf8'))
    hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash % SHARDS;
}

describe('shardOf', () => {
  it('is FNV-1a of the UTF-8 bytes up to the last slash, for ASCII and any other name', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' })), (name) => {
        expect(shardOf(name)).toBe(reference(name));
      }),
      { numRuns: 2_000 },
    );
    for (const name of ['payments', 'scale-0-1-42', 'api/node-a', 'zürich/db', '東京', 'a\u007f', 'x/\u00e9'])
      expect(shardOf(name)).toBe(reference(name));
  });

  it('puts siblings (the same prefix before the last slash) on one shard', () => {
    expect(shardOf('api/node-a')).toBe(shardOf('api/node-b'));
    expect(shardOf('zürich/a')).toBe(shardOf('zürich/b'));
  });
});
