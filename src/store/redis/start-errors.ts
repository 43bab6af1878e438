import net from 'node:net';

/** A start that can never succeed as configured: its message says why, for the operator. */
export class RedisStartError extends Error {
  constructor(message: string, cause: unknown) {
    super(message, { cause });
    this.name = 'RedisStartError';
  }
}

/**
 * Why a Redis connection at start will never succeed however long it is retried, as a
 * sentence for the operator; null when retrying may help (refused: Redis may be starting).
 * Follows nginx, which stops at start on an upstream host name that does not resolve.
 * Redis's own words are quoted; they never contain the password.
 */
export function permanentStartFailure(error: unknown, url: URL): string | null {
  const message = String((error as Error)?.message ?? error);
  const code = String((error as { code?: unknown })?.code ?? '');
  if (
    /^(WRONGPASS|NOAUTH|NOPERM)\b/.test(message) ||
    /^ERR (invalid (username-)?password|Client sent AUTH|AUTH )/i.test(message)
  ) {
    const who =
      url.username === ''
        ? url.password === ''
          ? 'no credentials given'
          : 'the password given'
        : `user '${decodeURIComponent(url.username)}'`;
    return `authentication failed (${who}): Redis answered "${message}"`;
  }
  if (/^ERR (DB index is out of range|invalid DB index)/i.test(message))
    return `database ${url.pathname.slice(1)} cannot be selected: Redis answered "${message}"`;
  if (['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL'].includes(code) || /getaddrinfo/.test(message)) {
    return `the host name '${url.hostname}' does not resolve (DNS: ${message})`;
  }
  if (/CERT|SSL|TLS|ERR_OSSL|HOSTNAME|IP_MISMATCH/.test(code) || /certificate|SSL routines|TLS/i.test(message))
    return `the TLS handshake failed: ${message.replace(/\s+/g, ' ').trim()}${code ? ` (${code})` : ''}${tlsHint(code)}`;
  return null;
}

/** What the operator can change for a failed TLS handshake, after the error (the `tls_*` options). */
function tlsHint(code: string): string {
  if (/CERTIFICATE_REQUIRED/.test(code)) return '; this Redis asks for a client certificate: give tls_cert and tls_key';
  if (/ALERT_(UNKNOWN_CA|BAD_CERTIFICATE|CERTIFICATE_UNKNOWN|DECRYPT_ERROR)/.test(code))
    return '; Redis refused the client certificate (tls_cert, tls_key)';
  if (/CERT|SIGNATURE|ISSUER|ALTNAME/.test(code))
    return "; the server's certificate is checked against tls_ca (Node's bundled roots without it) and its name against tls_servername (the host without it)";
  return '';
}

/**
 * `rediss://` whose handshake got no answer: ask the port in plain text. A Redis that answers
 * `PING` in RESP is not speaking TLS there, which is worth saying at once.
 */
export function speaksPlainRedis(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (answer: boolean) => {
      socket.destroy();
      resolve(answer);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(/^[+-]/.test(data.toString('latin1'))));
  });
}
