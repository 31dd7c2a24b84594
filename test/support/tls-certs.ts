// Test support: a CA and a server certificate it signed for localhost and 127.0.0.1, made with the
// openssl CLI at test time (for a redis-server, sentinel or cluster node that speaks TLS), and any
// other CAs asked for by name (a CA the client is not given: the wrong one).
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCertificates {
  /** the CA's certificate file (ca.crt) */
  ca: string;
  /** the server's certificate and key (node.crt, node.key) */
  cert: string;
  key: string;
  /** each other CA's certificate file, by name (<name>.crt) */
  others: Record<string, string>;
}

export function makeCertificates(dir: string, otherCas: string[] = []): TestCertificates {
  const openssl = (...args: string[]) =>
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  for (const ca of ['ca', ...otherCas])
    openssl(
      ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-keyout', `${ca}.key`, '-out', `${ca}.crt`],
      ...['-subj', `/CN=speech-gateway test ${ca}`],
    );
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'node.key', '-out', 'node.csr', '-subj', '/CN=localhost');
  writeFileSync(join(dir, 'node.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(
    ...['x509', '-req', '-in', 'node.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial'],
    ...['-days', '1', '-extfile', 'node.ext', '-out', 'node.crt'],
  );
  return {
    ca: join(dir, 'ca.crt'),
    cert: join(dir, 'node.crt'),
    key: join(dir, 'node.key'),
    others: Object.fromEntries(otherCas.map((n) => [n, join(dir, `${n}.crt`)])),
  };
}
