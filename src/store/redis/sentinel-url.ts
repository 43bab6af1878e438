import { decodeCredentials, parseHostList, parseTlsOptions, TLS_OPTION_NAMES, type TlsPaths } from './tls-url.js';

/**
 * `redis+sentinel://[user:pass@]host1:26379,host2:26379/<master-name>[/db][?sentinel_username=u&sentinel_password=p]`
 * (also `rediss+sentinel://`: TLS to the sentinels and the data nodes). The credentials before
 * `@` are the data nodes'; the sentinels are asked with `sentinel_username`/`sentinel_password`
 * (a sentinel's own `requirepass` or ACL user), without any when absent (docs/many-hosts.md).
 * With `rediss+sentinel://`, the `tls_*` options (`tls-url.ts`) hold for the sentinels and the data nodes.
 */
export interface SentinelUrl {
  readonly tls: boolean;
  readonly sentinels: readonly { readonly host: string; readonly port: number }[];
  readonly masterName: string;
  readonly db: number;
  readonly username: string;
  readonly password: string;
  /** The sentinels' own credentials (`''`: none). */
  readonly sentinelUsername: string;
  readonly sentinelPassword: string;
  /** The `tls_*` options (with `tls` only). */
  readonly tlsPaths: TlsPaths;
}

const SENTINEL_URL =
  /^(rediss?)\+sentinel:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/@]*)\/([^/?#]*)(?:\/([^/?#]*))?\/?(?:\?([^#]*))?$/;
const OPTIONS = new Set<string>(['sentinel_username', 'sentinel_password', ...TLS_OPTION_NAMES]);
const DEFAULT_SENTINEL_PORT = 26379;

export const isSentinelUrl = (raw: string): boolean => /^rediss?\+sentinel:/.test(raw);

/** The parsed URL, or why it is refused (a sentence after the URL). */
export function parseSentinelUrl(raw: string): SentinelUrl | { problem: string } {
  const m = SENTINEL_URL.exec(raw);
  if (m === null)
    return {
      problem:
        'is not redis+sentinel://[user:pass@]host:26379[,host:26379...]/<master-name>[/db][?sentinel_username=...&sentinel_password=...] (rediss+sentinel:// for TLS)',
    };
  const [, scheme, user = '', pass = '', hostList = '', name = '', dbRaw = '', query = ''] = m;
  const options = new URLSearchParams(query);
  for (const key of options.keys())
    if (!OPTIONS.has(key))
      return {
        problem: `has the unknown option '${key}'; the options are sentinel_username and sentinel_password${scheme === 'rediss' ? `, and for TLS ${TLS_OPTION_NAMES.join(', ')}` : ''}`,
      };
  const tlsPaths = parseTlsOptions(options, scheme === 'rediss');
  if ('problem' in tlsPaths) return tlsPaths;
  const sentinels = parseHostList(
    hostList,
    DEFAULT_SENTINEL_PORT,
    (entry) => `has sentinel address '${entry}'; each must be host[:port] (port 26379 by default)`,
  );
  if ('problem' in sentinels) return sentinels;
  if (name === '') return { problem: 'has no master name (redis+sentinel://host:26379/<master-name>[/db])' };
  if (dbRaw !== '' && !/^\d{1,5}$/.test(dbRaw))
    return { problem: `has database '${dbRaw}'; it must be a number (…/<master-name>/0)` };
  const credentials = decodeCredentials(user, pass);
  if ('problem' in credentials) return credentials;
  const [username, password] = credentials;
  const sentinelUsername = options.get('sentinel_username') ?? '';
  const sentinelPassword = options.get('sentinel_password') ?? '';
  return {
    tls: scheme === 'rediss',
    sentinels,
    masterName: decodeURIComponent(name),
    db: Number(dbRaw || 0),
    username,
    password,
    sentinelUsername,
    sentinelPassword,
    tlsPaths,
  };
}
