/**
 * TLS to Redis (`rediss://`, `rediss+sentinel://`, `rediss+cluster://`): the URL options, as file
 * paths. The server's certificate is always verified: against `tls_ca` when given (PEM, one or
 * more certificates; it replaces Node's bundled roots), else against Node's bundled roots; its
 * name against `tls_servername` when given, else the host connected to. `tls_cert` and
 * `tls_key` (PEM, both or neither) are the client certificate for mutual TLS. There is no option
 * to skip the check (docs/many-hosts.md, "TLS").
 */
export interface TlsPaths {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
  readonly servername?: string;
}

export const TLS_OPTION_NAMES = ['tls_ca', 'tls_cert', 'tls_key', 'tls_servername'] as const;

/** The `tls_*` options of a URL's query (the caller refuses every other name it does not know), or why they are refused. */
export function parseTlsOptions(options: URLSearchParams, tls: boolean): TlsPaths | { problem: string } {
  const given = TLS_OPTION_NAMES.filter((name) => options.has(name));
  if (given.length === 0) return {};
  if (!tls) return { problem: `has the option '${given[0]}', which needs TLS: use the rediss scheme` };
  for (const name of given) {
    if (options.getAll(name).length > 1) return { problem: `has the option '${name}' more than once` };
    if (options.get(name) === '') return { problem: `has an empty '${name}'` };
  }
  if (options.has('tls_cert') !== options.has('tls_key'))
    return { problem: 'has only one of tls_cert and tls_key; a client certificate needs both' };
  return {
    ...(options.has('tls_ca') ? { ca: options.get('tls_ca')! } : {}),
    ...(options.has('tls_cert') ? { cert: options.get('tls_cert')!, key: options.get('tls_key')! } : {}),
    ...(options.has('tls_servername') ? { servername: options.get('tls_servername')! } : {}),
  };
}

/** A Redis address of a multi-host URL (Sentinel, Cluster). */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

/**
 * The comma-separated `host[:port]` list of a multi-host URL (IPv6 in brackets), or why an
 * entry is refused. Without `defaultPort` every entry must name its port.
 */
export function parseHostList(
  list: string,
  defaultPort: number | undefined,
  refusal: (entry: string) => string,
): HostPort[] | { problem: string } {
  const hosts: HostPort[] = [];
  for (const entry of list.split(',')) {
    const hp = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(entry);
    const port = Number(hp?.[2] ?? defaultPort);
    if (hp === null || !(port >= 1 && port <= 65535)) return { problem: refusal(entry) };
    hosts.push({ host: hp[1]!.replace(/^\[|\]$/g, ''), port });
  }
  return hosts;
}

/** The URL's user and password, percent-decoded, or why they are refused. */
export function decodeCredentials(user: string, pass: string): [string, string] | { problem: string } {
  try {
    return [decodeURIComponent(user), decodeURIComponent(pass)];
  } catch {
    return { problem: 'has credentials that are not valid percent-encoding' };
  }
}
