/**
 * JWT test kit (issue 30): a JWKS served on loopback by the test, signing keys made with jose,
 * and tokens signed with them. Times are on the test's fake clock.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

export const ISSUER = 'https://kubernetes.default.svc.cluster.local';
export const AUDIENCE = 'circuitlog';
export const SUBJECT = 'system:serviceaccount:shop:checkout';

/** A JWKS on 127.0.0.1 that serves `keys` as they are at each request, counting the requests. */
export interface JwksHost {
  readonly url: string;
  keys: JWK[];
  /** The status it answers (200: the keys; any other: an empty body). */
  status: number;
  requests: number;
  /** The host goes away: the port refuses connections from now on. */
  close(): Promise<void>;
}

export async function serveJwks(keys: JWK[]): Promise<JwksHost> {
  const server = http.createServer((_req, res) => {
    host.requests++;
    if (host.status !== 200) return res.writeHead(host.status).end();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys: host.keys }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const host: JwksHost = {
    url: `http://127.0.0.1:${port}/openid/v1/jwks`,
    keys,
    status: 200,
    requests: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return host;
}

export interface SigningKey {
  readonly kid: string;
  readonly alg: string;
  /** The public key as the JWKS lists it. */
  readonly jwk: JWK;
  readonly privateKey: CryptoKey;
}

/** A fresh key pair; `listedAlg: false` leaves `alg` out of the listed public key. */
export async function signingKey(
  kid: string,
  alg = 'RS256',
  options: { listedAlg?: boolean } = {},
): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid, use: 'sig' };
  if (options.listedAlg !== false) jwk.alg = alg;
  return { kid, alg, jwk, privateKey };
}

/**
 * A token signed by `key`, issued at `nowMs`, valid one hour, for SUBJECT with scopes `read
 * report`; `claims` and `header` override.
 */
export function signToken(
  key: SigningKey,
  nowMs: number,
  claims: JWTPayload = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  return new SignJWT({
    iss: ISSUER,
    aud: AUDIENCE,
    sub: SUBJECT,
    iat,
    exp: iat + 3600,
    scope: 'read report',
    ...claims,
  })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, ...header })
    .sign(key.privateKey);
}

/** An unsecured token (`alg: none`, empty signature) with the claims a good token has. */
export function unsecuredToken(nowMs: number, header: Record<string, unknown> = {}): string {
  const iat = Math.floor(nowMs / 1000);
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const payload = { iss: ISSUER, aud: AUDIENCE, sub: SUBJECT, iat, exp: iat + 3600, scope: 'admin' };
  return `${part({ alg: 'none', ...header })}.${part(payload)}.`;
}
