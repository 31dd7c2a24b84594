// The Helm chart with a real helm (v4): lint --strict, template over the values files in ci/, every
// rendered object validated against the Kubernetes API schemas, and the settings it renders
// accepted by the gateway's own config loader. Bad values are refused by values.schema.json.
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/config.js';
import { registry } from '../../src/telemetry/index.js';
import { helm, helmBinary } from './helm-tool.js';
import { validateObject, type K8sObject } from './helm-models.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const chart = join(root, 'helm/speech-gateway');
const valuesFiles = readdirSync(join(chart, 'ci')).filter((f) => f.endsWith('.yaml'));
let home: string;

beforeAll(() => {
  home = mkdtempSync(join(tmpdir(), 'helm-'));
  helmBinary(); // unpack once, before the tests run helm side by side
});
afterAll(() => rmSync(home, { recursive: true, force: true }));

/** Renders the chart with the values files and --set pairs; the objects, or helm's exit and stderr. */
async function render(files: string[], set: string[] = []) {
  const args = ['template', 'sgw', chart, ...files.flatMap((f) => ['-f', f]), ...set.flatMap((s) => ['--set', s])];
  const r = await helm(args, home);
  const objects =
    r.code === 0
      ? parseAllDocuments(r.stdout)
          .map((d) => d.toJS() as K8sObject)
          .filter(Boolean)
      : [];
  return { ...r, objects };
}

function one(objects: K8sObject[], kind: string): K8sObject & { spec: any; data: any } {
  const found = objects.filter((o) => o.kind === kind);
  assert.equal(found.length, 1, `one ${kind} (got ${found.length})`);
  return found[0] as never;
}

/** What an operator's existing Secret holds (the chart only names it). */
const existingSecretData = { UPSTREAM_CREDENTIALS: '{"*":{"clientId":"gateway","clientSecret":"s"}}' };

/** What the downward API tells one pod about itself. */
const podFields: Record<string, string> = {
  'metadata.name': 'sgw-speech-gateway-6b7c9d5f4-x2v4q',
  'status.podIP': '10.1.2.3',
};

/** The environment a pod gets: its ConfigMap, plus the Secret it names (the chart's, decoded, or an
 * existing one), then its own `env` entries (downward API fields, `$(VAR)` expanded as the kubelet does). */
function podEnv(objects: K8sObject[]): Record<string, string> {
  const container = one(objects, 'Deployment').spec.template.spec.containers[0];
  const ref = container.envFrom.find((e: any) => e.secretRef)?.secretRef.name;
  const secret = objects.find((o) => o.kind === 'Secret' && o.metadata.name === ref) as
    { data?: Record<string, string> } | undefined;
  const decoded = Object.entries(secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]);
  const env: Record<string, string> = {
    ...one(objects, 'ConfigMap').data,
    ...(ref && !secret ? existingSecretData : Object.fromEntries(decoded)),
  };
  for (const e of container.env ?? []) {
    env[e.name] = e.valueFrom
      ? podFields[e.valueFrom.fieldRef.fieldPath]
      : e.value.replace(/\$\((\w+)\)/g, (m: string, name: string) => env[name] ?? m);
  }
  return env;
}

describe('helm chart', () => {
  it('passes helm lint --strict with its defaults and every ci values file', async () => {
    for (const f of ['', ...valuesFiles]) {
      const r = await helm(['lint', '--strict', chart, ...(f ? ['-f', join(chart, 'ci', f)] : [])], home);
      assert.equal(r.code, 0, `lint ${f || 'defaults'}: ${r.stdout}${r.stderr}`);
    }
  });

  it.each(valuesFiles)('%s renders objects that validate and settings the gateway accepts', async (f) => {
    const r = await render([join(chart, 'ci', f)]);
    assert.equal(r.code, 0, r.stderr);
    for (const o of r.objects) validateObject(o);
    for (const kind of ['Deployment', 'Service', 'ConfigMap', 'PodDisruptionBudget']) one(r.objects, kind);
    const config = loadConfig(podEnv(r.objects)); // throws with the variable's name if it would not start
    assert.equal(config.USAGE_JOURNAL_DIR, '/var/lib/speech-gateway/usage-journal');
  });

  it('has the API server refuse a field it does not know, as kubectl would', async () => {
    const { objects } = await render([], ['affinity.nodeAfinity.x=1']);
    assert.throws(
      () => objects.forEach(validateObject),
      /Deployment sgw-speech-gateway: unknown fields \.spec\.template\.spec\.affinity\.nodeAfinity$/,
    );
  });

  it('runs non-root on a read-only root filesystem, writing only the journal volume and /tmp', async () => {
    const { objects } = await render([]);
    const pod = one(objects, 'Deployment').spec.template.spec;
    const [c] = pod.containers;
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.ok(pod.securityContext.runAsUser > 0);
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
    assert.equal(c.securityContext.allowPrivilegeEscalation, false);
    const mounts = Object.fromEntries(c.volumeMounts.map((m: any) => [m.mountPath, m.name]));
    assert.deepEqual(Object.keys(mounts).sort(), ['/tmp', podEnv(objects).USAGE_JOURNAL_DIR].sort());
    for (const v of pod.volumes) assert.ok(v.emptyDir, `${v.name} is an emptyDir by default`);
  });

  it('probes /healthz and /readyz, and gives the drain its time before the kubelet kills the pod', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const pod = one(objects, 'Deployment').spec.template.spec;
    const [c] = pod.containers;
    assert.equal(c.livenessProbe.httpGet.path, '/healthz');
    assert.equal(c.readinessProbe.httpGet.path, '/readyz');
    const [cmd, sleep] = c.lifecycle.preStop.exec.command;
    assert.equal(cmd, 'sleep');
    const env = loadConfig(podEnv(objects));
    assert.equal(env.DRAIN_SECONDS, 120);
    // The handover of resumable sessions (up to END_TIMEOUT_MS), then the drain of the others.
    const needed = Number(sleep) + env.END_TIMEOUT_MS / 1000 + env.DRAIN_SECONDS + env.END_TIMEOUT_MS / 1000;
    assert.ok(pod.terminationGracePeriodSeconds > needed, `grace ${pod.terminationGracePeriodSeconds} s > ${needed} s`);
  });

  it('rolls one pod at a time without losing capacity: a new pod is ready before an old one stops', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const { strategy } = one(objects, 'Deployment').spec;
    assert.deepEqual(strategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
  });

  it('gives each pod its replica id (the pod name) and its internal address (the pod IP)', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const env = loadConfig(podEnv(objects));
    assert.equal(env.REPLICA_ID, podFields['metadata.name']);
    assert.equal(env.ADVERTISE_URL, 'ws://10.1.2.3:8080');
  });

  it('refuses a termination grace shorter than the drain', async () => {
    const r = await render([], ['terminationGracePeriodSeconds=30']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /terminationGracePeriodSeconds 30 is shorter than the drain needs: 105/);
  });

  it('keeps /streams connections open 2 hours at the ingress and hashes on the resume key', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const a = one(objects, 'Ingress').metadata.annotations as Record<string, string>;
    assert.ok(Number(a['nginx.ingress.kubernetes.io/proxy-read-timeout']) >= 7200);
    assert.ok(Number(a['nginx.ingress.kubernetes.io/proxy-send-timeout']) >= 7200);
    assert.equal(a['nginx.ingress.kubernetes.io/upstream-hash-by'], '$arg_resume');
  });

  it('scales on CPU and on a metric the gateway exports', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const metrics = one(objects, 'HorizontalPodAutoscaler').spec.metrics;
    assert.deepEqual(
      metrics.map((m: any) => m.type),
      ['Resource', 'Pods'],
    );
    assert.ok(registry.getSingleMetric(metrics[1].pods.metric.name), `${metrics[1].pods.metric.name} is exported`);
    assert.equal(one(objects, 'Deployment').spec.replicas, undefined, 'the autoscaler owns the replica count');
  });

  it('puts credentials, the usage token, the Redis URL and the cluster secret in the Secret, never the ConfigMap', async () => {
    const { objects } = await render([join(chart, 'ci', 'production-values.yaml')]);
    const env = loadConfig(podEnv(objects));
    assert.deepEqual(JSON.parse(env.UPSTREAM_CREDENTIALS ?? ''), {
      '*': { clientId: 'gateway', clientSecret: 'client-secret-value' },
    });
    assert.equal(env.CLUSTER_SECRET, 'cluster-secret-value-0123456789abcdef');
    // YAML numbers reach templates as floats: written as integers, not 8.388608e+06.
    assert.equal(one(objects, 'ConfigMap').data.MAX_BUFFERED_AUDIO_BYTES, '8388608');
    const configMap = JSON.stringify(one(objects, 'ConfigMap'));
    for (const secret of ['client-secret-value', 'usage-token-value', 'redis-password', 'cluster-secret-value'])
      assert.ok(!configMap.includes(secret), secret);
  });

  it('reads an existing Secret by name and renders none of its own', async () => {
    const { objects } = await render([join(chart, 'ci', 'existing-secret-values.yaml')]);
    assert.equal(objects.filter((o) => o.kind === 'Secret').length, 0);
    const pod = one(objects, 'Deployment').spec.template.spec;
    assert.ok(pod.containers[0].envFrom.some((e: any) => e.secretRef?.name === 'speech-gateway-credentials'));
  });

  it('renders the alert rules file the Prometheus tests check, as it is, into the PrometheusRule', async () => {
    const source = readFileSync(join(root, 'grafana/alerts.yaml'), 'utf8');
    assert.equal(
      readFileSync(join(chart, 'files', 'alerts.yaml'), 'utf8'),
      source,
      'the chart copy is stale: npm run helm:rules',
    );
    const { objects } = await render([join(chart, 'ci', 'monitoring-values.yaml')]);
    assert.deepEqual(one(objects, 'PrometheusRule').spec.groups, parse(source).groups);
    assert.equal(one(objects, 'ServiceMonitor').spec.endpoints[0].path, '/metrics');
  });

  it.each([
    [['replicaCount=-1'], /replicaCount/],
    [['unknownKey=1'], /unknownKey/],
    [['config.DRAIN_SECONDS=abc'], /DRAIN_SECONDS/],
    [['config.CHUNK_MS=5'], /CHUNK_MS/],
    [['config.NOT_A_SETTING=1'], /NOT_A_SETTING/],
    [['ingress.timeoutSeconds=60'], /timeoutSeconds/],
    [['podSecurityContext.runAsNonRoot=false'], /runAsNonRoot/],
    [['securityContext.readOnlyRootFilesystem=false'], /readOnlyRootFilesystem/],
    [['config.UPSTREAM_URL=wss://upstream.example'], /AUTH_URL/],
    [['config.UPSTREAM_AUTH=client-credentials'], /upstreamCredentials/],
    [['redis.url=http://redis:6379'], /redis/],
    [['secret.existingSecret=s', 'secret.usageApiToken=t'], /usageApiToken/],
    [['secret.clusterSecret=too-short'], /clusterSecret/],
    [['rollingUpdate.maxSurge=0'], /maxSurge/],
  ])('refuses %j, naming it', async (set, named) => {
    const r = await render([], set);
    assert.notEqual(r.code, 0, 'helm template succeeded');
    assert.match(r.stderr, /values don't meet the specifications of the schema/);
    assert.match(r.stderr, named);
  });
});
