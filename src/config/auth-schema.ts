/**
 * The config file's `auth:` and `audit:` sections (issue 30): who may do what. The credentials
 * file itself (ids, token hashes, scopes) is read by src/auth; this only says where it is and
 * how JWTs are checked.
 */
import { z } from 'zod';
import { CALLER_MAX_LENGTH } from '../domain/caller.js';
import { positiveInt } from './fields.js';

/**
 * The scopes a credential may hold: `Scope` of src/auth/identity.ts, written here again because
 * src/auth reads this config (an import back would be a cycle); test/auth/jwt-config.test.ts
 * checks the two lists are the same.
 */
export const SCOPE_NAMES = ['read', 'report', 'operate', 'configure', 'admin'] as const;

/** An identity pattern: caller-name characters (src/domain/caller.ts), `*` only as the last one. */
const IDENTITY_PATTERN = new RegExp(`^(?=.{1,${CALLER_MAX_LENGTH}}$)[A-Za-z0-9_.:~\\-/]*\\*?$`);
const PATTERN_MESSAGE = "an identity or a pattern ending in '*' (caller-name characters, at most 128)";

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
    /**
     * Scopes given to identities by name, added to those their token carries (a Kubernetes
     * service-account token carries none): identity pattern (`*` only last, so `*` alone is
     * every JWT identity) -> scopes; an identity gets the scopes of every pattern it matches.
     */
    scopes: z
      .record(z.string(), z.array(z.enum(SCOPE_NAMES)))
      .superRefine((scopes, ctx) => {
        for (const pattern of Object.keys(scopes).filter((p) => !IDENTITY_PATTERN.test(p)))
          ctx.addIssue({ code: 'custom', path: [pattern], message: PATTERN_MESSAGE });
      })
      .default({}),
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
