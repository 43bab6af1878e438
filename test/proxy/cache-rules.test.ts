import { describe, expect, it } from 'vitest';
import {
  acceptsCoding,
  credentialFields,
  mayShareAnswer,
  mayShareRequest,
  varyMatches,
  varyNames,
  varyValues,
} from '../../src/proxy/cache-rules.js';

const credentials = credentialFields(['X-Api-Key']);
const share = (headers: Record<string, string>, method = 'GET') => mayShareRequest(method, headers, credentials);

describe('shared-cache rules (RFC 9111)', () => {
  it('lets only bodiless, anonymous, unconditional GET and HEAD requests share', () => {
    expect(share({ accept: 'text/html' })).toBe(true);
    expect(share({}, 'HEAD')).toBe(true);
    expect(share({}, 'POST')).toBe(false);
    expect(share({ 'content-length': '3' })).toBe(false);
    expect(share({ 'transfer-encoding': 'chunked' })).toBe(false);
    for (const field of ['authorization', 'cookie', 'x-api-key']) expect(share({ [field]: 'v' }), field).toBe(false);
    for (const field of ['if-match', 'if-none-match', 'if-modified-since', 'if-unmodified-since', 'if-range', 'range'])
      expect(share({ [field]: 'v' }), field).toBe(false);
    for (const cc of ['no-cache', 'No-Store', 'max-age=0']) expect(share({ 'cache-control': cc }), cc).toBe(false);
    expect(share({ pragma: 'no-cache' })).toBe(false);
    expect(share({ 'cache-control': 'max-age=60' })).toBe(true);
  });

  it('never shares Set-Cookie, private, no-store, no-cache, Vary: * or a 206/304 answer', () => {
    const answer = (headers: Record<string, string>, status = 200) => mayShareAnswer(status, (name) => headers[name]);
    expect(answer({ 'cache-control': 'public, max-age=60', vary: 'Accept-Language' })).toBe(true);
    expect(answer({ 'set-cookie': 'a=1' })).toBe(false);
    for (const cc of ['private', 'no-store', 'no-cache', 'no-cache="Set-Cookie"'])
      expect(answer({ 'cache-control': cc }), cc).toBe(false);
    expect(answer({ vary: 'Accept, *' })).toBe(false);
    expect(answer({}, 206)).toBe(false);
    expect(answer({}, 304)).toBe(false);
    expect(answer({}, 500)).toBe(true);
  });

  it("matches Vary'd fields with list spacing normalised, an absent field only an absent one", () => {
    const names = varyNames('Accept-Language, X-Tenant') as string[];
    expect(names).toEqual(['accept-language', 'x-tenant']);
    const stored = varyValues({ 'accept-language': 'en, de', 'x-tenant': 't1' }, names);
    expect(varyMatches({ 'accept-language': 'en,de', 'x-tenant': 't1' }, names, stored)).toBe(true);
    expect(varyMatches({ 'accept-language': 'en, de' }, names, stored)).toBe(false);
    expect(varyMatches({ 'accept-language': 'en, de', 'x-tenant': '' }, names, stored)).toBe(false);
  });

  it('reads Accept-Encoding as RFC 9110 section 12.5.3 says', () => {
    expect(acceptsCoding(undefined, 'gzip')).toBe(true);
    expect(acceptsCoding('gzip, br', 'gzip')).toBe(true);
    expect(acceptsCoding('br', 'gzip')).toBe(false);
    expect(acceptsCoding('gzip;q=0, *', 'gzip')).toBe(false);
    expect(acceptsCoding('*;q=0.5', 'gzip')).toBe(true);
    expect(acceptsCoding('identity', 'identity')).toBe(true);
  });
});
