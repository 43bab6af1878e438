import fs from 'node:fs';
import tls from 'node:tls';
import { RedisStartError } from './start-errors.js';
import type { TlsPaths } from './tls-url.js';

/** What the Redis client's `socket` takes for TLS: the files read and checked. */
export interface TlsSocket {
  readonly tls: true;
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly servername?: string;
}

function readPem(option: string, file: string): Buffer {
  try {
    return fs.readFileSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new RedisStartError(`${option} '${file}' cannot be read (${code})`, error);
  }
}

/**
 * Read the files named and check them as Node's TLS will use them (a file with no certificate,
 * a key that does not match its certificate): a RedisStartError saying which option is wrong.
 */
export function readTls(paths: TlsPaths): TlsSocket {
  const socket: TlsSocket = {
    tls: true,
    ...(paths.ca === undefined ? {} : { ca: readPem('tls_ca', paths.ca) }),
    ...(paths.cert === undefined ? {} : { cert: readPem('tls_cert', paths.cert) }),
    ...(paths.key === undefined ? {} : { key: readPem('tls_key', paths.key) }),
    ...(paths.servername === undefined ? {} : { servername: paths.servername }),
  };
  if (socket.ca !== undefined && !socket.ca.toString('latin1').includes('-----BEGIN CERTIFICATE-----'))
    throw new RedisStartError(`tls_ca '${paths.ca}' holds no PEM certificate`, null);
  try {
    tls.createSecureContext({ ca: socket.ca, cert: socket.cert, key: socket.key });
  } catch (error) {
    throw new RedisStartError(
      `tls_ca, tls_cert or tls_key cannot be used: ${(error as Error).message} (${paths.cert ?? paths.ca})`,
      error,
    );
  }
  return socket;
}
