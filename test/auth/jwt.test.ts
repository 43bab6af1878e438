import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SignJWT } from 'jose';
import pino from 'pino';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createJwtVerifier, type JwtVerifier, looksLikeJwt } from '../../src/auth/jwt.js';
import { JWKS_COOLDOWN_MS, JWKS_MAX_AGE_MS } from '../../src/auth/jwks-source.js';
import { type JwtConfig, jwtSchema } from '../../src/config/auth-schema.js';
import { FakeClock, silentLogger } from '../helper.js';
import {
  AUDIENCE,
  ISSUER,
  type JwksHost,
  SUBJECT,
  type SigningKey,
  serveJwks,
  signingKey,
  signToken,
  unsecuredToken,
} from './jwks-host.js';

let keyA: SigningKey;
let keyB: SigningKey;
let keyPss: SigningKey;
let keyEs: SigningKey;

beforeAll(async () => {
  [keyA, keyB, keyPss, keyEs] = await Promise.all([
    signingKey('key-a'),
    signingKey('key-b'),
    signingKey('key-pss', 'PS256', { listedAlg: false }),
    signingKey('key-es', 'ES256'),
  ]);
});

const open: { verifier: JwtVerifier; host?: JwksHost }[] = [];
afterEach(async () => {
  for (const { verifier, host } of open.splice(0)) {
    verifier.close();
    await host?.close();
  }
});

/** A verifier on a JWKS URL serving `keys`, on a fake clock. */
async function onUrl(keys = [keyA.jwk], config: Partial<JwtConfig> = {}, cacheEntries?: number) {
  const host = await serveJwks(keys);
  const clock = new FakeClock();
  const parsed = jwtSchema.parse({ jwks_url: host.url, issuer: ISSUER, audience: AUDIENCE, ...config });
  const verifier = createJwtVerifier(parsed, { now: clock.now, logger: silentLogger, cacheEntries });
  open.push({ verifier, host });
  return { host, clock, verifier };
}

describe('JWT identities: a good token', () => {
  it('names the identity by its sub, with the scopes of its scope claim, kind jwt, callers under its id', async () => {
    const { clock, verifier } = await onUrl();
    const identity = await verifier.verify(await signToken(keyA, clock.nowMs));
    expect(identity).toEqual({
      id: SUBJECT,
      kind: 'jwt',
      scopes: new Set(['read', 'report']),
      circuits: null,
      callers: [SUBJECT, `${SUBJECT}/*`],
      maxNewCircuits: null,
    });
  });

  it('answers a verified token from memory, and not a token it has not seen', async () => {
    const { clock, verifier } = await onUrl();
    const token = await signToken(keyA, clock.nowMs);
    expect(verifier.cached(token)).toBeUndefined();
    const identity = await verifier.verify(token);
    expect(verifier.cached(token)).toBe(identity);
    expect(verifier.cached(await signToken(keyA, clock.nowMs, { sub: 'other' }))).toBeUndefined();
  });

  it('reads scopes from an array claim too, ignoring words that are not scopes', async () => {
    const { clock, verifier } = await onUrl([keyA.jwk], { scopes_claim: 'roles' });
    const token = await signToken(keyA, clock.nowMs, { roles: ['operate', 'root', 7, 'read'] });
    expect((await verifier.verify(token))?.scopes).toEqual(new Set(['operate', 'read']));
    const spaced = await signToken(keyA, clock.nowMs, { roles: 'configure  sudo report' });
    expect((await verifier.verify(spaced))?.scopes).toEqual(new Set(['configure', 'report']));
  });

  it('adds the scopes auth.jwt.scopes gives the identity, by name and by pattern', async () => {
    const { clock, verifier } = await onUrl([keyA.jwk], {
      scopes: {
        [SUBJECT]: ['report'],
        'system:serviceaccount:shop:*': ['read'],
        'system:serviceaccount:ops:*': ['admin'],
      },
    });
    const token = await signToken(keyA, clock.nowMs, { scope: undefined });
    expect((await verifier.verify(token))?.scopes).toEqual(new Set(['report', 'read']));
  });

  it('takes the identity from identity_claim', async () => {
    const { clock, verifier } = await onUrl([keyA.jwk], { identity_claim: 'client_id' });
    expect((await verifier.verify(await signToken(keyA, clock.nowMs, { client_id: 'billing' })))?.id).toBe('billing');
  });

  it('accepts a token expired less than 60 s ago, and one valid from less than 60 s on (clock skew)', async () => {
    const { clock, verifier } = await onUrl();
    const nowS = Math.floor(clock.nowMs / 1000);
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { exp: nowS - 50 }))).not.toBeNull();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { nbf: nowS + 50 }))).not.toBeNull();
  });

  it('tries each key for a token without a kid when several keys could have signed it', async () => {
    const { clock, verifier } = await onUrl([keyB.jwk, keyA.jwk]);
    const token = await signToken(keyA, clock.nowMs, {}, { kid: undefined });
    expect((await verifier.verify(token))?.id).toBe(SUBJECT);
  });
});

describe('JWT identities: refusals', () => {
  it('refuses an expired token (more than 60 s past exp)', async () => {
    const { clock, verifier } = await onUrl();
    const nowS = Math.floor(clock.nowMs / 1000);
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { exp: nowS - 61 }))).toBeNull();
  });

  it('refuses a token not yet valid (nbf more than 60 s ahead)', async () => {
    const { clock, verifier } = await onUrl();
    const nowS = Math.floor(clock.nowMs / 1000);
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { nbf: nowS + 61 }))).toBeNull();
  });

  it('stops answering a cached token from memory 60 s after its exp, and then refuses it', async () => {
    const { clock, verifier } = await onUrl();
    const token = await signToken(keyA, clock.nowMs, { exp: Math.floor(clock.nowMs / 1000) + 600 });
    expect(await verifier.verify(token)).not.toBeNull();
    clock.advance(660_000 - 1);
    expect(verifier.cached(token)).not.toBeNull();
    clock.advance(1);
    expect(verifier.cached(token)).toBeUndefined();
    expect(await verifier.verify(token)).toBeNull();
  });

  it('refuses a token without exp', async () => {
    const { clock, verifier } = await onUrl();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { exp: undefined }))).toBeNull();
  });

  it('refuses a token from another issuer', async () => {
    const { clock, verifier } = await onUrl();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { iss: 'https://elsewhere' }))).toBeNull();
  });

  it('refuses a token for another audience', async () => {
    const { clock, verifier } = await onUrl();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { aud: 'vault' }))).toBeNull();
  });

  it('refuses alg none, also naming a known kid', async () => {
    const { clock, verifier } = await onUrl();
    expect(await verifier.verify(unsecuredToken(clock.nowMs))).toBeNull();
    expect(await verifier.verify(unsecuredToken(clock.nowMs, { kid: keyA.kid }))).toBeNull();
  });

  it('refuses HS256 signed with the public key as the secret (algorithm confusion)', async () => {
    const { clock, verifier } = await onUrl();
    const secret = new TextEncoder().encode(JSON.stringify(keyA.jwk));
    const iat = Math.floor(clock.nowMs / 1000);
    const token = await new SignJWT({ iss: ISSUER, aud: AUDIENCE, sub: SUBJECT, exp: iat + 3600 })
      .setProtectedHeader({ alg: 'HS256', kid: keyA.kid })
      .sign(secret);
    expect(await verifier.verify(token)).toBeNull();
  });

  it('refuses an algorithm the key does not have: PS256 against an RSA key listed without alg (RS256 only)', async () => {
    const { clock, verifier } = await onUrl([keyPss.jwk]);
    expect(await verifier.verify(await signToken(keyPss, clock.nowMs))).toBeNull();
  });

  it('accepts an EC key listed with its alg (the algorithms come from the JWKS)', async () => {
    const { clock, verifier } = await onUrl([keyEs.jwk]);
    expect((await verifier.verify(await signToken(keyEs, clock.nowMs)))?.id).toBe(SUBJECT);
  });

  it('refuses a token signed by a key not in the JWKS under a kid that is', async () => {
    const { clock, verifier } = await onUrl();
    const forged = await signToken({ ...keyB, kid: keyA.kid }, clock.nowMs);
    expect(await verifier.verify(forged)).toBeNull();
  });

  it('refuses an identity claim that is not a caller name, or missing', async () => {
    const { clock, verifier } = await onUrl();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { sub: 'has space' }))).toBeNull();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { sub: 'x'.repeat(129) }))).toBeNull();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { sub: undefined }))).toBeNull();
  });

  it('refuses bearer values that are not JWTs, and an over-long one unread', async () => {
    const { verifier } = await onUrl();
    expect(await verifier.verify('not-a-jwt')).toBeNull();
    expect(await verifier.verify('a.b.c')).toBeNull();
    expect(verifier.cached(`${'a'.repeat(9000)}.b.c`)).toBeNull();
  });

  it('answers a refused token from memory for 10 s (a flood of one bad token checks it once)', async () => {
    const { clock, verifier } = await onUrl();
    const token = await signToken(keyA, clock.nowMs, { aud: 'vault' });
    expect(await verifier.verify(token)).toBeNull();
    expect(verifier.cached(token)).toBeNull();
    clock.advance(10_000);
    expect(verifier.cached(token)).toBeUndefined();
  });
});

describe('JWT identities: the JWKS', () => {
  it('refuses an unknown kid after reading the JWKS once more, and reads it at most once per 30 s', async () => {
    const { host, clock, verifier } = await onUrl();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs))).not.toBeNull();
    expect(host.requests).toBe(1);
    clock.advance(JWKS_COOLDOWN_MS);
    expect(await verifier.verify(await signToken(keyB, clock.nowMs))).toBeNull();
    expect(host.requests).toBe(2);
    clock.advance(JWKS_COOLDOWN_MS - 1);
    expect(await verifier.verify(await signToken(keyB, clock.nowMs, { sub: 'again' }))).toBeNull();
    expect(host.requests).toBe(2);
  });

  it('picks up a key rotation without a restart: a token with the new kid verifies after one read', async () => {
    const { host, clock, verifier } = await onUrl();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs))).not.toBeNull();
    host.keys = [keyA.jwk, keyB.jwk];
    clock.advance(JWKS_COOLDOWN_MS);
    expect((await verifier.verify(await signToken(keyB, clock.nowMs)))?.id).toBe(SUBJECT);
    expect(host.requests).toBe(2);
  });

  it('keeps accepting a token with 40 minutes left after the JWKS host goes away', async () => {
    const { host, clock, verifier } = await onUrl();
    const token = await signToken(keyA, clock.nowMs, { exp: Math.floor(clock.nowMs / 1000) + 40 * 60 });
    const identity = await verifier.verify(token);
    await host.close();
    clock.advance(JWKS_MAX_AGE_MS + JWKS_COOLDOWN_MS); // the set is due to be read again, and cannot be
    expect(verifier.cached(token)).toBe(identity);
    expect(await verifier.verify(token)).toBe(identity);
    // A token not seen before is checked against the last good set.
    expect((await verifier.verify(await signToken(keyA, clock.nowMs, { sub: 'new' })))?.id).toBe('new');
  });

  it('refuses every JWT while no JWKS could be read, and tries again at most once per 30 s', async () => {
    const host = await serveJwks([keyA.jwk]);
    host.status = 503;
    const clock = new FakeClock();
    const config = jwtSchema.parse({ jwks_url: host.url, issuer: ISSUER, audience: AUDIENCE });
    const verifier = createJwtVerifier(config, { now: clock.now, logger: silentLogger });
    open.push({ verifier, host });
    expect(await verifier.verify(await signToken(keyA, clock.nowMs))).toBeNull();
    host.status = 200;
    clock.advance(JWKS_COOLDOWN_MS - 1);
    expect(await verifier.verify(await signToken(keyA, clock.nowMs, { sub: 'early' }))).toBeNull();
    expect(host.requests).toBe(1);
    clock.advance(1);
    expect((await verifier.verify(await signToken(keyA, clock.nowMs, { sub: 'later' })))?.id).toBe('later');
    expect(host.requests).toBe(2);
  });

  it('reads a jwks_file, and reads it again for an unknown kid', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'circuitlog-jwks-'));
    const file = path.join(dir, 'jwks.json');
    fs.writeFileSync(file, JSON.stringify({ keys: [keyA.jwk] }));
    const clock = new FakeClock();
    const config = jwtSchema.parse({ jwks_file: file, issuer: ISSUER, audience: [AUDIENCE, 'other'] });
    const verifier = createJwtVerifier(config, { now: clock.now, logger: silentLogger });
    open.push({ verifier });
    expect(await verifier.verify(await signToken(keyA, clock.nowMs))).not.toBeNull();
    fs.writeFileSync(file, JSON.stringify({ keys: [keyA.jwk, keyB.jwk] }));
    clock.advance(JWKS_COOLDOWN_MS);
    expect(await verifier.verify(await signToken(keyB, clock.nowMs))).not.toBeNull();
  });

  it('keeps the last good set when the JWKS answers something else', async () => {
    const { host, clock, verifier } = await onUrl();
    expect(await verifier.verify(await signToken(keyA, clock.nowMs))).not.toBeNull();
    host.keys = 'not keys' as never;
    clock.advance(JWKS_COOLDOWN_MS);
    expect(await verifier.verify(await signToken(keyB, clock.nowMs))).toBeNull();
    expect(host.requests).toBe(2);
    expect((await verifier.verify(await signToken(keyA, clock.nowMs, { sub: 'still' })))?.id).toBe('still');
  });
});

describe('JWT identities: the shape of a JWT', () => {
  it('is three base64url parts, the signature possibly empty', async () => {
    expect(looksLikeJwt(await signToken(keyA, Date.now()))).toBe(true);
    expect(looksLikeJwt(unsecuredToken(Date.now()))).toBe(true);
    expect(
      ['', 'a.b', 'a..c', 'a.b.c.d', 'a.b.c=', 'a b.c.d', 'Bearer a.b.c', 'x'.repeat(43)].map(looksLikeJwt),
    ).toEqual(Array(8).fill(false));
  });
});

describe('JWT identities: memory', () => {
  it('checks one new token once when many requests bring it at the same time', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(line) });
    const clock = new FakeClock();
    const host = await serveJwks([keyA.jwk]);
    const config = jwtSchema.parse({ jwks_url: host.url, issuer: ISSUER, audience: AUDIENCE });
    const verifier = createJwtVerifier(config, { now: clock.now, logger });
    open.push({ verifier, host });
    const token = await signToken(keyA, clock.nowMs, { aud: 'vault' });
    expect(await Promise.all(Array.from({ length: 5 }, () => verifier.verify(token)))).toEqual(Array(5).fill(null));
    expect(lines.filter((line) => line.includes('token refused'))).toHaveLength(1);
  });

  it('keeps at most cacheEntries verified tokens, forgetting the oldest first', async () => {
    const { clock, verifier } = await onUrl([keyA.jwk], {}, 2);
    const tokens = await Promise.all(['one', 'two', 'three'].map((sub) => signToken(keyA, clock.nowMs, { sub })));
    for (const token of tokens) await verifier.verify(token);
    expect(tokens.map((t) => verifier.cached(t)?.id)).toEqual([undefined, 'two', 'three']);
  });

  it('keeps at most cacheEntries refused tokens', async () => {
    const { clock, verifier } = await onUrl([keyA.jwk], {}, 2);
    const tokens = await Promise.all(['a', 'b', 'c'].map((aud) => signToken(keyA, clock.nowMs, { aud })));
    for (const token of tokens) await verifier.verify(token);
    expect(tokens.map((t) => verifier.cached(t))).toEqual([undefined, null, null]);
  });
});
