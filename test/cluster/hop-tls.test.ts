// The internal hop over wss://: replica 0 advertises a wss:// address served by a TLS terminator in
// front of its port (as a sidecar or mesh would), and replica 1 trusts that certificate's CA only
// through NODE_EXTRA_CA_CERTS. A resume landing on replica 1 is carried to replica 0 over TLS: the
// resume key, the signed identity and the session's output never cross the network in clear.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { replicaUrl, startCluster, type Cluster } from '../support/cluster.js';
import { chromeChunks } from '../support/fixtures.js';
import { newResumeKey } from '../support/sdk.js';
import { openClient } from '../support/stack.js';
import { delay } from '../support/wait.js';

const configuration = { primaryLanguage: 'en', audioFormat: 'audio/webm;codecs=opus' };
const chunks = chromeChunks('webm-opus');

/** A self-signed certificate for 127.0.0.1, in a temporary directory. */
function certificate(): { dir: string; key: Buffer; cert: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), 'sgw-tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      join(dir, 'key.pem'),
      '-out',
      join(dir, 'cert.pem'),
      '-days',
      '1',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { dir, key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
}

/** TLS in front of a plain port: counts the connections whose handshake completed. */
async function tlsTerminator(
  o: { key: Buffer; cert: Buffer },
  target: () => number,
): Promise<{ port: number; handshakes: () => number; close(): void }> {
  let handshakes = 0;
  const sockets = new Set<net.Socket>();
  const server = tls.createServer({ key: o.key, cert: o.cert }, (client) => {
    handshakes++;
    const plain = net.connect(target(), '127.0.0.1');
    for (const s of [client, plain]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => (client.destroy(), plain.destroy()));
    }
    client.pipe(plain).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    handshakes: () => handshakes,
    close: () => (server.close(), sockets.forEach((s) => s.destroy())),
  };
}

describe('the internal hop over wss://', () => {
  let cluster: Cluster;
  let terminator: Awaited<ReturnType<typeof tlsTerminator>>;
  beforeAll(async () => {
    const tlsFiles = certificate();
    terminator = await tlsTerminator(tlsFiles, () => cluster.replicas[0].adminPort);
    const env = { CLUSTER_SECRET: randomBytes(32).toString('hex'), RESUME_GRACE_SECONDS: '10' };
    cluster = await startCluster(2, env, (i): Record<string, string> =>
      i === 0
        ? { ADVERTISE_URL: `wss://127.0.0.1:${terminator.port}` }
        : { NODE_EXTRA_CA_CERTS: join(tlsFiles.dir, 'cert.pem') },
    );
  }, 60_000);
  afterAll(async () => {
    await cluster?.close();
    terminator?.close();
  });

  it('carries a resume that lands on the other replica to the session over TLS', async () => {
    const tenant = 'hop-tls';
    const key = newResumeKey();
    const first = await openClient(await replicaUrl(cluster, 0, tenant, key));
    first.sendJson({ type: 'config', configuration });
    const accepted = await first.next('CONFIG_ACCEPTED');
    chunks.slice(0, 12).forEach((c) => first.send(c));
    await first.next('transcript', 10_000);
    first.ws.terminate();
    await delay(300);

    const before = terminator.handshakes();
    const second = await openClient(await replicaUrl(cluster, 1, tenant, key));
    second.sendJson({ type: 'config', configuration });
    const resumed = await second.next('CONFIG_ACCEPTED', 10_000);
    assert.equal(resumed.resumed, true);
    assert.equal(resumed.sessionId, accepted.sessionId, 'the session on replica 0');
    assert.equal(terminator.handshakes() - before, 1, 'one TLS connection: the hop');
    second.sendJson({ type: 'end' });
    await second.next('ended', 20_000);
    const metrics = await (await fetch(`http://127.0.0.1:${cluster.replicas[1].adminPort}/metrics`)).text();
    assert.match(metrics, /speech_gateway_hops_total\{result="opened"\} 1/);
  }, 60_000);
});
