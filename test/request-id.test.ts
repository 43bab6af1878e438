import { describe, expect, it } from 'vitest';
import { newRequestId, requestIdFrom, uuidMaker } from '../src/request-id.js';

// The made request id (src/request-id.ts): a random UUID version 4, its random bytes drawn in
// bulk (one draw of 4 KiB per 256 ids) rather than per id.

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** A fill that counts its calls and writes a known pattern: byte i of draw d is (i + d) mod 256. */
function countingFill() {
  const draws: number[] = [];
  const fill = (bytes: Buffer) => {
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i + draws.length) & 0xff;
    draws.push(bytes.length);
  };
  return { draws, fill };
}

describe('the made request id', () => {
  it('draws 4 KiB of random bytes once per 256 ids', () => {
    const { draws, fill } = countingFill();
    const make = uuidMaker(fill);
    expect(draws).toEqual([]); // nothing drawn before the first id
    for (let i = 0; i < 256; i++) make();
    expect(draws).toEqual([4096]);
    make();
    expect(draws).toEqual([4096, 4096]);
  });

  it('writes the drawn bytes as a UUID with the version 4 and variant bits set', () => {
    const { fill } = countingFill();
    const make = uuidMaker(fill);
    // Bytes 0..15, then 16..31: byte 6 becomes 0x4_, byte 8 becomes 0b10xx_xxxx.
    expect(make()).toBe('00010203-0405-4607-8809-0a0b0c0d0e0f');
    expect(make()).toBe('10111213-1415-4617-9819-1a1b1c1d1e1f');
    for (let i = 2; i < 256; i++) expect(make()).toMatch(UUID_V4);
    expect(make()).toBe('01020304-0506-4708-890a-0b0c0d0e0f10'); // the second draw's first id
  });

  it('makes distinct UUIDs from the CSPRNG', () => {
    const ids = Array.from({ length: 10_000 }, () => newRequestId());
    for (const id of ids.slice(0, 600)) expect(id).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('keeps a well-formed incoming id and makes one for a missing or malformed one', () => {
    expect(requestIdFrom('kept_Root=1-abc')).toBe('kept_Root=1-abc');
    expect(requestIdFrom(undefined)).toMatch(UUID_V4);
    expect(requestIdFrom('has space')).toMatch(UUID_V4);
  });
});
