// Throwaway certificate authorities and server certificates made with openssl, for tests of
// TLS against local servers. EC P-256 keys: fast to make. Valid for two days.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const VALID_DAYS = '2';
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export interface KeyPair {
  certFile: string;
  keyFile: string;
}

export async function makeCa(dir: string, name: string): Promise<KeyPair> {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  await run('openssl', [
    'req',
    '-x509',
    ...EC_KEY,
    '-keyout',
    keyFile,
    '-out',
    certFile,
    '-days',
    VALID_DAYS,
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return { certFile, keyFile };
}

/** A server certificate signed by `ca` for the given subjectAltNames (e.g. `IP:127.0.0.1`, `DNS:localhost`). */
export async function issueServerCert(
  ca: KeyPair,
  dir: string,
  name: string,
  altNames: readonly string[],
): Promise<KeyPair> {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, `subjectAltName=${altNames.join(',')}\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n`);
  await run('openssl', ['req', '-new', ...EC_KEY, '-keyout', keyFile, '-out', csr, '-subj', `/CN=${name}`]);
  await run('openssl', [
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.certFile,
    '-CAkey',
    ca.keyFile,
    '-CAcreateserial',
    '-out',
    certFile,
    '-days',
    VALID_DAYS,
    '-extfile',
    ext,
  ]);
  return { certFile, keyFile };
}
