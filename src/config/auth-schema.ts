/**
 * The config file's `auth:` and `audit:` sections (issue 30): who may do what. The credentials
 * file itself (ids, token hashes, scopes) is read by src/auth; this only says where it is and
 * how JWTs are checked.
 */
import { z } from 'zod';
import { positiveInt } from './fields.js';

export const jwtSchema = z
  .object({
    /** A local JWKS file (JSON), or ... */
    jwks_file: z.string().min(1).optional(),
    /** ... a JWKS URL (fetched with a timeout, cached, refreshed on an unknown `kid` at most once per 30 s). */
    jwks_url: z.url().optional(),
    /** The `iss` a token must carry. */
    issuer: z.string().min(1),
    /** The `aud` a token must carry (one of). */
    audience: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)]),
    /** The claim that names the identity. */
    identity_claim: z.string().min(1).default('sub'),
    /** The claim that holds the scopes: a space-separated string (RFC 8693 `scope`) or an array. */
    scopes_claim: z.string().min(1).default('scope'),
  })
  .strict()
  .refine((j) => (j.jwks_file === undefined) !== (j.jwks_url === undefined), {
    message: 'set exactly one of jwks_file and jwks_url',
  });

export const authSchema = z
  .object({
    /** The credentials file (YAML or JSON); `CIRCUITLOG_CREDENTIALS` wins over it. */
    credentials_file: z.string().min(1).optional(),
    jwt: jwtSchema.optional(),
  })
  .strict();

export const auditSchema = z
  .object({
    /** How long audit entries are kept; never trimmed by the transitions' retention. */
    retention_days: positiveInt(36_500).default(365),
  })
  .strict();

export type AuthConfig = z.infer<typeof authSchema>;
export type JwtConfig = z.infer<typeof jwtSchema>;
export type AuditConfig = z.infer<typeof auditSchema>;
