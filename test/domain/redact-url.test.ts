import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/domain/redact-url.js';

/** [what it is, the URL as configured, as printed]. Every secret below is spelled with an `S`. */
const CASES: [string, string, string][] = [
  ['a password', 'redis://:S3cret@h:6379/0', 'redis://:***@h:6379/0'],
  ['a user and a password', 'redis://bob:S3cret@h:6379/1', 'redis://bob:***@h:6379/1'],
  ['a lone userinfo (it may be a token)', 'redis://S3cretToken@h:6379', 'redis://***@h:6379'],
  ['an encoded @ in the password', 'rediss://:S3%40cret@h:6380/0', 'rediss://:***@h:6380/0'],
  ['an unencoded @ in the password', 'redis://:S3@cret@h:6379', 'redis://:***@h:6379'],
  ['an unencoded / in the password', 'redis://:S3/cret@h:6379/0', 'redis://:***@h:6379/0'],
  ['a bare % in the password', 'redis://:S3%cret@h', 'redis://:***@h'],
  ['a ? in the password', 'redis://:S3?cret@h/0', 'redis://:***@h/0'],
  ['a # in the password', 'redis://:S3#cret@h/0', 'redis://:***@h/0'],
  ['@ and / together', 'redis+sentinel://:S3@c/ret@h1:26379/m', 'redis+sentinel://:***@h1:26379/m'],
  ['an IPv6 host', 'redis://:S3cret@[::1]:6379/0', 'redis://:***@[::1]:6379/0'],
  ['an IPv6 host, no credentials', 'redis://[::1]:6379/0', 'redis://[::1]:6379/0'],
  ['an @ in a harmless option', 'redis://:S3cret@h/0?tls_ca=/etc/a@b.pem', 'redis://:***@h/0?tls_ca=/etc/a@b.pem'],
  [
    'a Sentinel list with both passwords',
    'redis+sentinel://:S3cret@h1:26379,[::1]:26380/mymaster/2?sentinel_username=su&sentinel_password=S3ntinel',
    'redis+sentinel://:***@h1:26379,[::1]:26380/mymaster/2?sentinel_username=su&sentinel_password=***',
  ],
  [
    'an encoded key (sentinel%5Fpassword)',
    'redis+sentinel://h1/m?sentinel%5Fpassword=S3ntinel',
    'redis+sentinel://h1/m?sentinel%5Fpassword=***',
  ],
  [
    'a key encoded elsewhere',
    'redis+sentinel://h1/m?sentinel_pass%77ord=S3cret',
    'redis+sentinel://h1/m?sentinel_pass%77ord=***',
  ],
  [
    'a key in capitals',
    'redis+sentinel://h1/m?SENTINEL_PASSWORD=S3cret',
    'redis+sentinel://h1/m?SENTINEL_PASSWORD=***',
  ],
  [
    'an & in a secret value',
    'redis://h/0?sentinel_password=S3&cret&tls_ca=/x',
    'redis://h/0?sentinel_password=***&tls_ca=/x',
  ],
  ['a # in a secret value', 'redis://h/0?sentinel_password=S3#cret', 'redis://h/0?sentinel_password=***'],
  [
    'rediss+cluster:// with tls_key',
    'rediss+cluster://u:S3cret@a:7000,b:7001?tls_key=/S3cret.pem&tls_cert=/c.pem',
    'rediss+cluster://u:***@a:7000,b:7001?tls_key=***&tls_cert=/c.pem',
  ],
  [
    'token, secret and key in names',
    'redis://h/0?auth_token=S1&client%5Fsecret=S2&Key=S3&db=1',
    'redis://h/0?auth_token=***&client%5Fsecret=***&Key=***&db=1',
  ],
  ['an upstream node', 'https://user:S3cret@node.example:8443', 'https://user:***@node.example:8443'],
  ['no scheme at all', 'redis//:S3cret@h', 'redis//:***@h'],
  ['nothing secret', 'redis://h:6379/0?tls_ca=/ca.pem', 'redis://h:6379/0?tls_ca=/ca.pem'],
];

describe('redactUrl', () => {
  it.each(CASES)('%s: %s', (_, raw, shown) => {
    expect(redactUrl(raw)).toBe(shown);
    expect(redactUrl(raw)).not.toMatch(/S\d|S3/);
  });
});
