import { decodeCredentials, parseHostList, parseTlsOptions, TLS_OPTION_NAMES, type TlsPaths } from './tls-url.js';

/**
 * `redis+cluster://[user:pass@]host1:7000,host2:7001,...[/]` (also `rediss+cluster://`: TLS to
 * every node): the nodes to ask for the cluster's layout; the client finds every other node
 * itself. The credentials are every node's. A Cluster has one database (0): no path. With
 * `rediss+cluster://`, the `tls_*` options (`tls-url.ts`) hold for every node.
 */
export interface ClusterUrl {
  readonly tls: boolean;
  readonly nodes: readonly { readonly host: string; readonly port: number }[];
  readonly username: string;
  readonly password: string;
  /** The `tls_*` options (with `tls` only). */
  readonly tlsPaths: TlsPaths;
}

const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/@?#]*)\/?(?:\?([^#]*))?$/;

export const isClusterUrl = (raw: string): boolean => /^rediss?\+cluster:/.test(raw);

/** The parsed URL, or why it is refused (a sentence after the URL). */
export function parseClusterUrl(raw: string): ClusterUrl | { problem: string } {
  const m = CLUSTER_URL.exec(raw);
  if (m === null)
    return {
      problem:
        'is not redis+cluster://[user:pass@]host:port[,host:port...][/?tls options] (a Cluster has no database number; rediss+cluster:// for TLS)',
    };
  const [, scheme, user = '', pass = '', hostList = '', query = ''] = m;
  const options = new URLSearchParams(query);
  for (const key of options.keys())
    if (!(TLS_OPTION_NAMES as readonly string[]).includes(key))
      return {
        problem: `has the unknown option '${key}'; the options are (with rediss+cluster://) ${TLS_OPTION_NAMES.join(', ')}`,
      };
  const tlsPaths = parseTlsOptions(options, scheme === 'rediss');
  if ('problem' in tlsPaths) return tlsPaths;
  const nodes = parseHostList(hostList, undefined, (entry) => `has node address '${entry}'; each must be host:port`);
  if ('problem' in nodes) return nodes;
  const credentials = decodeCredentials(user, pass);
  if ('problem' in credentials) return credentials;
  const [username, password] = credentials;
  return { tls: scheme === 'rediss', nodes, username, password, tlsPaths };
}
