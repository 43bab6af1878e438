import { describe, expect, it } from 'vitest';
import { credentialTable, parseCredentials, tokenSha256 } from '../../src/auth/credentials.js';
import { bearer, buildCredentialsApp, entry } from './credentials-app.js';

// Rotating a token under one id (issue 30): the entry lists the old and the new token's hash, both
// sign in as the same credential, so the quorum still counts that service once.

const OLD = 'checkout-old-token-0123456789';
const NEW = 'checkout-new-token-0123456789';
const MERGE = { 'content-type': 'application/merge-patch+json' };

describe('a credential with two tokens while one is rotated', () => {
  it('reads token_sha256 as a list of hashes, every one the same identity; a hash listed twice is refused', () => {
    const entries = parseCredentials(
      `credentials:\n  - id: checkout\n    token_sha256: [${tokenSha256(OLD)}, ${tokenSha256(NEW)}]\n    scopes: [report]\n`,
      'creds.yaml',
    );
    const table = credentialTable(entries);
    expect(table.get(tokenSha256(OLD))).toBe(table.get(tokenSha256(NEW)));
    expect(table.get(tokenSha256(NEW))?.id).toBe('checkout');
    expect(() =>
      parseCredentials(
        `credentials:\n  - id: a\n    token_sha256: [${tokenSha256(OLD)}, ${tokenSha256(OLD)}]\n    scopes: [read]\n`,
        'creds.yaml',
      ),
    ).toThrow(/credentials\.0\.token_sha256: the same token is listed twice/);
  });

  it('counts the old and the new token as one voter of a quorum', async () => {
    const rotating = {
      ...entry('checkout', OLD, ['report', 'read', 'configure']),
      token_sha256: [tokenSha256(OLD), tokenSha256(NEW)],
    };
    const t = buildCredentialsApp([rotating, entry('orders', 'orders-token-0123456789', ['report', 'read'])]);
    const patch = { failure_threshold: 2, quorum: { min_callers: 2 } };
    const made = await t.request('PATCH', '/circuits/pay', patch, { ...MERGE, ...bearer(NEW) });
    expect(made.status, await made.clone().text()).toBe(201);
    for (const token of [OLD, NEW])
      for (const caller of ['checkout/a', 'checkout/b'])
        await t.request('POST', '/circuits/pay/outcomes', { success: false, caller }, bearer(token));
    const state = async () =>
      ((await (await t.request('GET', '/circuits/pay', undefined, bearer(OLD))).json()) as { state: string }).state;
    expect(await state()).toBe('closed'); // one credential, one vote, whichever of its tokens it used
    for (let i = 0; i < 2; i++)
      await t.request('POST', '/circuits/pay/outcomes', { success: false }, bearer('orders-token-0123456789'));
    expect(await state()).toBe('open'); // a second credential failing too: the quorum of 2 is met
  });
});
