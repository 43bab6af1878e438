import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { tempDir } from '../server-process.js';

const exec = promisify(execFile);

/**
 * A throwaway certificate authority of the test's own (openssl, in a temp dir, valid one day):
 * a server certificate for 127.0.0.1 and localhost, and a client certificate (mutual TLS),
 * both signed by it; and a second CA that signed nothing here (the wrong CA).
 */
export interface TlsFiles {
  readonly dir: string;
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
  readonly otherCa: string;
  /** A server certificate of the test CA that names only `elsewhere.invalid` (not 127.0.0.1). */
  readonly elsewhereCert: string;
  readonly elsewhereKey: string;
  /** A client certificate of the other CA (one Redis does not trust). */
  readonly strangerCert: string;
  readonly strangerKey: string;
}

const openssl = (dir: string, ...args: string[]) => exec('openssl', args, { cwd: dir });

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

async function makeCa(dir: string, name: string): Promise<void> {
  await openssl(
    dir,
    'req',
    '-x509',
    ...EC,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '1',
    '-subj',
    `/CN=circuitlog test ${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
}

/** A leaf certificate `name.pem` / `name.key` signed by `ca`, with these extensions. */
async function makeLeaf(dir: string, name: string, extensions: string, ca = 'ca'): Promise<void> {
  fs.writeFileSync(path.join(dir, `${name}.ext`), extensions);
  await openssl(dir, 'req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  await openssl(
    dir,
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '1',
    '-extfile',
    `${name}.ext`,
  );
}

let made: Promise<TlsFiles> | undefined;

/** The test process's certificates (made once per test file, in a few hundred ms). */
export function tlsFiles(): Promise<TlsFiles> {
  made ??= (async () => {
    const dir = tempDir('circuitlog-tls-');
    await Promise.all([makeCa(dir, 'ca'), makeCa(dir, 'other-ca')]);
    // Redis presents its server certificate as its client certificate too (a replica to its
    // primary, a sentinel to the nodes, the cluster bus): it carries both uses.
    const leaf = 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n';
    await Promise.all([
      makeLeaf(
        dir,
        'server',
        `${leaf}extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n`,
      ),
      makeLeaf(dir, 'client', `${leaf}extendedKeyUsage=clientAuth\n`),
      makeLeaf(dir, 'stranger', `${leaf}extendedKeyUsage=clientAuth\n`, 'other-ca'),
      makeLeaf(
        dir,
        'elsewhere',
        `${leaf}extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:elsewhere.invalid\n`,
      ),
    ]);
    const file = (name: string) => path.join(dir, name);
    return {
      dir,
      ca: file('ca.pem'),
      serverCert: file('server.pem'),
      serverKey: file('server.key'),
      clientCert: file('client.pem'),
      clientKey: file('client.key'),
      otherCa: file('other-ca.pem'),
      elsewhereCert: file('elsewhere.pem'),
      elsewhereKey: file('elsewhere.key'),
      strangerCert: file('stranger.pem'),
      strangerKey: file('stranger.key'),
    };
  })();
  return made;
}

/** `redis-server` (and `--sentinel`) arguments: TLS only (no plain port), TLS replication and cluster bus. */
export function tlsServerArgs(files: TlsFiles, port: number, authClients: 'yes' | 'no' = 'yes'): string[] {
  return [
    '--port',
    '0',
    '--tls-port',
    String(port),
    '--tls-cert-file',
    files.serverCert,
    '--tls-key-file',
    files.serverKey,
    '--tls-ca-cert-file',
    files.ca,
    '--tls-auth-clients',
    authClients,
    '--tls-replication',
    'yes',
  ];
}

/** The loopback ports that speak TLS only, with the files `redis-cli` needs for them. */
const tlsPorts = new Map<number, TlsFiles>();

export const registerTlsPort = (port: number, files: TlsFiles) => tlsPorts.set(port, files);

/** `redis-cli` arguments for a TLS port (the client certificate, the CA); none for a plain one. */
export function cliTlsArgs(port: number): string[] {
  const files = tlsPorts.get(port);
  return files === undefined
    ? []
    : ['--tls', '--cacert', files.ca, '--cert', files.clientCert, '--key', files.clientKey];
}

/** The `tls_*` URL options circuitlog is given: the CA, and the client certificate unless `withClient` is false. */
export function tlsQuery(files: TlsFiles, { ca = files.ca, withClient = true } = {}): string {
  const options = new URLSearchParams({ tls_ca: ca });
  if (withClient) {
    options.set('tls_cert', files.clientCert);
    options.set('tls_key', files.clientKey);
  }
  return options.toString();
}

/** A TLS socket to a test server (is it up?), trusting the test CA, presenting the client certificate, whatever name it has. */
export function tlsConnect(files: TlsFiles, port: number): tls.TLSSocket {
  return tls.connect({
    host: '127.0.0.1',
    port,
    checkServerIdentity: () => undefined,
    ca: fs.readFileSync(files.ca),
    cert: fs.readFileSync(files.clientCert),
    key: fs.readFileSync(files.clientKey),
  });
}
