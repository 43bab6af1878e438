import { parseTlsOptions, TLS_OPTION_NAMES, type TlsPaths } from './tls-url.js';

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
  const nodes: { host: string; port: number }[] = [];
  for (const entry of hostList.split(',')) {
    const hp = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(entry);
    const port = Number(hp?.[2]);
    if (hp === null || port < 1 || port > 65535)
      return { problem: `has node address '${entry}'; each must be host:port` };
    nodes.push({ host: hp[1]!.replace(/^\[|\]$/g, ''), port });
  }
  let username: string;
  let password: string;
  try {
    [username, password] = [decodeURIComponent(user), decodeURIComponent(pass)];
  } catch {
    return { problem: 'has credentials that are not valid percent-encoding' };
  }
  return { tls: scheme === 'rediss', nodes, username, password, tlsPaths };
}
